// Test data: a catalog shaped as `describeKinds` answers (a few kinds, trimmed), and the
// offline example flow of flows/offline.json with the events `weft run --events` printed
// for it.

import type { KindCatalog, RunEvent } from '../bindings';
import type { CanvasFlow } from '../flowMapping';

export const catalog = {
  commonFields: [
    { name: 'label', label: 'Label', help: 'The name shown.', fieldType: { type: 'text' }, default: '', required: false },
    { name: 'description', label: 'Description', help: 'A note.', fieldType: { type: 'text' }, default: '', required: false },
    { name: 'timeoutSeconds', label: 'Timeout', help: 'Seconds.', fieldType: { type: 'number', min: 0, max: 86400 }, default: null, required: false },
    { name: 'retry.maxAttempts', label: 'Attempts', help: 'Attempts.', fieldType: { type: 'integer', min: 1, max: 20 }, default: 1, required: false },
  ],
  templateNames: ['PREVIOUS_OUTPUT', 'input', 'approval'],
  kinds: [
    {
      id: 'start',
      title: 'Start',
      help: 'The entry point.',
      inputs: false,
      handles: [{ id: 'output', label: 'Output', kind: 'execution', rows: null }],
      fields: [{ name: 'initialInput', label: 'Initial input', help: '', fieldType: { type: 'json' }, default: null, required: false }],
    },
    {
      id: 'agent',
      title: 'Agent',
      help: 'Calls a model.',
      inputs: true,
      handles: [
        { id: 'output', label: 'Output', kind: 'execution', rows: null },
        { id: 'subagent', label: 'Subagents', kind: 'subagent', rows: null },
        { id: 'error', label: 'Error', kind: 'error', rows: null },
      ],
      fields: [
        { name: 'userPrompt', label: 'User prompt', help: '', fieldType: { type: 'template' }, default: '', required: false },
        { name: 'model', label: 'Model', help: '', fieldType: { type: 'text' }, default: '', required: false },
        { name: 'tools.web_search', label: 'Web search', help: '', fieldType: { type: 'boolean' }, default: false, required: false },
        { name: 'tools.subagents', label: 'Subagents', help: '', fieldType: { type: 'boolean' }, default: false, required: false },
        { name: 'tools.mcp', label: 'MCP tools', help: '', fieldType: { type: 'stringList' }, default: null, required: false },
        { name: 'approveTools', label: 'Approve tools', help: '', fieldType: { type: 'stringList' }, default: null, required: false },
        { name: 'description', label: 'Description', help: 'Told to a parent agent.', fieldType: { type: 'text' }, default: null, required: false },
      ],
    },
    {
      id: 'if',
      title: 'If',
      help: 'Tests the previous output.',
      inputs: true,
      handles: [
        { id: 'condition-{i}', label: 'Condition {i}', kind: 'execution', rows: 'conditions' },
        { id: 'false', label: 'Otherwise', kind: 'execution', rows: null },
      ],
      fields: [
        { name: 'conditions', label: 'Conditions', help: '', fieldType: { type: 'conditions', operators: ['equal', 'contains', 'gt'] }, default: [], required: false },
      ],
    },
    {
      id: 'approval',
      title: 'Approval',
      help: 'Pauses the run.',
      inputs: true,
      handles: [
        { id: 'approve', label: 'Approve', kind: 'execution', rows: null },
        { id: 'reject', label: 'Reject', kind: 'execution', rows: null },
      ],
      fields: [{ name: 'message', label: 'Message', help: '', fieldType: { type: 'template' }, default: '', required: false }],
    },
    { id: 'note', title: 'Note', help: 'A comment.', inputs: false, handles: [], fields: [] },
  ],
} as unknown as KindCatalog;

function node(id: string, type: string, x: number, y: number, data: Record<string, unknown> = {}) {
  return { id, type, position: { x, y }, data };
}

function edge(source: string, target: string, sourceHandle?: string) {
  const id = `${source}-${sourceHandle ?? 'output'}-${target}`;
  return sourceHandle ? { id, source, target, sourceHandle } : { id, source, target };
}

/** flows/offline.json: start → summary → large (if) → review (approval) → refunded / declined → result; large false → auto → result. */
export function offlineFlow(): CanvasFlow {
  return {
    version: 1,
    name: 'Refund desk (offline)',
    settings: { maxNodeVisits: 10 },
    nodes: [
      node('start', 'start', 0, 100, { label: 'Request', initialInput: { amount: 120, customer: 'Ada' } }),
      node('summary', 'template', 240, 100, { label: 'Summarize', template: '{{ customer }}' }),
      node('large', 'if', 480, 100, { label: 'Over 100?', conditions: [{ field: 'amount', operator: 'gt', value: 100 }] }),
      node('review', 'approval', 720, 0, { label: 'Manager review', message: '{{ summary }}. Approve?' }),
      node('refunded', 'template', 960, -60, { label: 'Refunded' }),
      node('declined', 'template', 960, 60, { label: 'Declined' }),
      node('auto', 'template', 720, 200, { label: 'Auto-approve' }),
      node('result', 'output', 1200, 100, { label: 'Result' }),
    ],
    edges: [
      edge('start', 'summary'),
      edge('summary', 'large'),
      edge('large', 'review', 'condition-0'),
      edge('large', 'auto', 'false'),
      edge('review', 'refunded', 'approve'),
      edge('review', 'declined', 'reject'),
      edge('refunded', 'result'),
      edge('declined', 'result'),
      edge('auto', 'result'),
    ],
  } as unknown as CanvasFlow;
}

const RUN_ID = '6c4ba313-67fb-4e7c-bbc7-63ab45649f30';

export function event(
  seq: number,
  type: RunEvent['type'],
  nodeId: string | null,
  content: string,
  extra: Partial<RunEvent> = {},
): RunEvent {
  return {
    seq,
    runId: RUN_ID,
    ts: `2026-11-21T20:56:18.${String(seq).padStart(3, '0')}Z`,
    type,
    ...(nodeId ? { nodeId } : {}),
    content,
    ...extra,
  } as RunEvent;
}

const SUMMARY = '{"amount":120,"customer":"Ada","summary":"Ada asks for 120 EUR: parcel lost"}';

/** The offline flow up to its pause at `review` (as `weft run --events` prints it). */
export function offlineEventsToPause(): RunEvent[] {
  return [
    event(1, 'run_start', null, '{"amount":120,"customer":"Ada"}'),
    event(2, 'step_start', 'start', 'Request'),
    event(3, 'start_prompt', 'start', '{"amount":120,"customer":"Ada"}'),
    event(4, 'step_end', 'start', '{"amount":120,"customer":"Ada"}'),
    event(5, 'step_start', 'summary', 'Summarize', { from: 'start' }),
    event(6, 'step_end', 'summary', SUMMARY),
    event(7, 'step_start', 'large', 'Over 100?', { from: 'summary' }),
    event(8, 'logic_check', 'large', 'condition 0 (amount gt 100) is true: taking condition-0'),
    event(9, 'step_end', 'large', SUMMARY),
    event(10, 'step_start', 'review', 'Manager review', { from: 'large' }),
    event(11, 'wait_input', 'review', 'Ada asks for 120 EUR: parcel lost. Approve the refund?'),
  ];
}

/** The events after approving at `review`. */
export function offlineEventsAfterApprove(): RunEvent[] {
  return [
    event(12, 'input_received', 'review', '{"decision":"approve","note":""}'),
    event(13, 'step_end', 'review', SUMMARY),
    event(14, 'step_start', 'refunded', 'Refunded', { from: 'review' }),
    event(15, 'step_end', 'refunded', 'Refunded 120 EUR to Ada.'),
    event(16, 'step_start', 'result', 'Result', { from: 'refunded' }),
    event(17, 'step_end', 'result', 'Refunded 120 EUR to Ada.'),
    event(18, 'run_end', null, '{"error":null,"result":"Refunded 120 EUR to Ada.","status":"completed"}'),
  ];
}
