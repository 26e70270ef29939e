// What the canvas shows about one run: node statuses, streamed tokens, outputs, the edges
// execution flows along, the approval it waits for, and its events for the log. The view is
// a pure fold over the run's events (`reduceRunEvent`), so a live run and a run replayed from
// the store (History) are shown by the same code.

import type { BreakWhen, NodeOutputRecord, RunDetail, RunEvent, RunStatus, Waiting } from './bindings';
import { canvasFlow, isSubagentEdge, type FlowEdge } from './flowMapping';

/** `cancelled`: the step was going when the run was cancelled or failed elsewhere. */
export type NodeStatus = 'idle' | 'running' | 'done' | 'failed' | 'paused' | 'skipped' | 'cancelled';

/** What the fold needs to know about the flow that runs. */
export interface RunContext {
  edges: readonly FlowEdge[];
  /** Nodes that can run (not notes): those a finished run never reached become "skipped". */
  runnableNodeIds: readonly string[];
}

export interface RunView {
  runId: string | null;
  /** `null` before any run. */
  status: RunStatus | null;
  events: RunEvent[];
  nodeStatus: Record<string, NodeStatus>;
  /** Streamed text of each node's current step (its `llm_delta`s). */
  streams: Record<string, string>;
  /** Each node's latest output (its last `step_end`). */
  outputs: Record<string, string>;
  /** What each node was given: the latest output of the node execution came from. */
  inputs: Record<string, string>;
  /** Why each failed node failed. */
  nodeErrors: Record<string, string>;
  /** Edges into the steps going on now; drawn animated while the run goes. */
  activeEdges: string[];
  /** Every edge this run went along. */
  traversedEdges: string[];
  waiting: Waiting | null;
  error: string | null;
  result: unknown;
  context: RunContext;
  runInput: string | null;
}

export function emptyRunView(context: RunContext = { edges: [], runnableNodeIds: [] }): RunView {
  return {
    runId: null,
    status: null,
    events: [],
    nodeStatus: {},
    streams: {},
    outputs: {},
    inputs: {},
    nodeErrors: {},
    activeEdges: [],
    traversedEdges: [],
    waiting: null,
    error: null,
    result: null,
    context,
    runInput: null,
  };
}

const ENDED: ReadonlySet<RunStatus | null> = new Set<RunStatus | null>(['completed', 'failed', 'cancelled']);

export function isRunEnded(status: RunStatus | null): boolean {
  return ENDED.has(status);
}

/**
 * Whether a `wait_input` is a breakpoint's (its content says so, docs/debugging.md: "breakpoint before
 * `node` …" / "breakpoint after `node` …") rather than an approval's.
 */
export function breakpointOf(content: string): BreakWhen | null {
  const stop = /^breakpoint (before|after) /.exec(content);
  return stop ? (stop[1] as BreakWhen) : null;
}

/** What a run waits for at `nodeId`, from its `wait_input` content. */
function waitingAt(nodeId: string, content: string): Waiting {
  const breakpoint = breakpointOf(content);
  return breakpoint ? { nodeId, message: content, breakpoint } : { nodeId, message: content };
}

/**
 * The view once a run went on from a stop after a node: that node ran before it stopped, so it
 * reads done again (the engine sends no event for the node when the run goes on).
 */
function goneOnFromStopAfter(view: RunView): RunView {
  const waiting = view.waiting;
  if (waiting?.breakpoint !== 'after' || view.nodeStatus[waiting.nodeId] !== 'paused') return view;
  return { ...view, nodeStatus: { ...view.nodeStatus, [waiting.nodeId]: 'done' }, waiting: null };
}

/** The node a waiting approval is shown at: a nested one (`sub/review`) at its subflow node. */
export function promptNodeOf(waiting: Waiting | null): string | null {
  if (!waiting) return null;
  return waiting.nodeId.split('/')[0] ?? null;
}

/** The node of this flow a nested run's events belong to: `each[2]/inner` → `each`. */
function topNodeOf(scope: string): string {
  return (scope.split('/')[0] ?? scope).replace(/\[\d+\]$/, '');
}

/** Folds one event into the view (without adding it to `events`; see `reduceRunEvents`). */
export function reduceRunEvent(view: RunView, event: RunEvent): RunView {
  if (event.type === 'run_start' && !event.scope) {
    return { ...view, runId: event.runId, status: 'running', runInput: event.content };
  }
  if (event.scope) return reduceNestedEvent(view, event, event.scope);
  const nodeId = event.nodeId ?? null;
  if (event.type === 'step_start' || event.type === 'run_end') view = goneOnFromStopAfter(view);
  switch (event.type) {
    case 'step_start': {
      if (!nodeId) return view;
      const from = event.from ?? null;
      const inputs = { ...view.inputs };
      if (from !== null) inputs[nodeId] = view.outputs[from] ?? '';
      else if (isEntry(view, nodeId) && view.runInput !== null) inputs[nodeId] = view.runInput;
      const incoming = view.context.edges.filter((edge) => edge.target === nodeId && !isSubagentEdge(edge));
      // The edge the step came by; a join (no `from`) came by every edge whose source is done.
      const newEdges = incoming
        .filter((edge) => (from !== null ? edge.source === from : view.nodeStatus[edge.source] === 'done'))
        .map((edge) => edge.id);
      const stillActive = view.activeEdges.filter((id) => {
        const edge = view.context.edges.find((candidate) => candidate.id === id);
        if (!edge || edge.target === nodeId) return false;
        const status = view.nodeStatus[edge.target];
        return status === 'running' || status === 'paused';
      });
      const { [nodeId]: _error, ...nodeErrors } = view.nodeErrors;
      return {
        ...view,
        status: view.status === 'paused' ? 'running' : view.status ?? 'running',
        nodeStatus: { ...view.nodeStatus, [nodeId]: 'running' },
        streams: { ...view.streams, [nodeId]: '' },
        inputs,
        nodeErrors,
        activeEdges: [...stillActive, ...newEdges],
        traversedEdges: union(view.traversedEdges, newEdges),
      };
    }
    case 'step_end':
      if (!nodeId) return view;
      return {
        ...view,
        nodeStatus: { ...view.nodeStatus, [nodeId]: 'done' },
        outputs: { ...view.outputs, [nodeId]: event.content },
      };
    case 'error':
      if (!nodeId) return { ...view, error: event.content };
      return {
        ...view,
        nodeStatus: { ...view.nodeStatus, [nodeId]: 'failed' },
        nodeErrors: { ...view.nodeErrors, [nodeId]: event.content },
      };
    case 'wait_input':
      if (!nodeId) return view;
      return {
        ...view,
        status: 'paused',
        nodeStatus: { ...view.nodeStatus, [nodeId]: 'paused' },
        waiting: waitingAt(nodeId, event.content),
      };
    case 'input_received':
      if (!nodeId) return view;
      return {
        ...view,
        status: 'running',
        nodeStatus: { ...view.nodeStatus, [nodeId]: 'running' },
        waiting: null,
      };
    case 'llm_delta':
      if (!nodeId) return view;
      return { ...view, streams: { ...view.streams, [nodeId]: (view.streams[nodeId] ?? '') + event.content } };
    case 'llm_response':
      // Providers that do not stream send the whole answer at once: show it the same way.
      if (!nodeId || (view.streams[nodeId] ?? '') !== '') return view;
      return { ...view, streams: { ...view.streams, [nodeId]: event.content } };
    case 'run_end': {
      const end = parseRunEnd(event.content);
      return finishRun(
        { ...view, result: end.result ?? view.result, error: end.error ?? view.error },
        end.status ?? 'completed',
      );
    }
    default:
      return view;
  }
}

/** Adds `events` to the view's log and folds them in. */
export function reduceRunEvents(view: RunView, events: readonly RunEvent[]): RunView {
  let next = view;
  for (const event of events) next = reduceRunEvent(next, event);
  return { ...next, events: view.events.concat(events) };
}

/**
 * Events of a nested run (a subflow, a forEach item) name the child flow's nodes: they go to
 * the log and say nothing about this flow's nodes, except that an approval deep inside pauses
 * the whole run, shown at the subflow node.
 */
function reduceNestedEvent(view: RunView, event: RunEvent, scope: string): RunView {
  const top = topNodeOf(scope);
  switch (event.type) {
    case 'wait_input':
      return {
        ...view,
        status: 'paused',
        nodeStatus: { ...view.nodeStatus, [top]: 'paused' },
        waiting: { nodeId: `${scope}/${event.nodeId ?? ''}`, message: event.content },
      };
    case 'input_received':
      return {
        ...view,
        status: 'running',
        nodeStatus: { ...view.nodeStatus, [top]: 'running' },
        waiting: null,
      };
    default:
      return view;
  }
}

/**
 * A finished run: nodes it never reached are skipped, steps still going were cut off (shown
 * as cancelled), nothing is animated any more.
 */
function finishRun(view: RunView, status: RunStatus): RunView {
  if (!isRunEnded(status)) return { ...view, status };
  const nodeStatus = { ...view.nodeStatus };
  for (const id of view.context.runnableNodeIds) {
    const current = nodeStatus[id];
    if (current === undefined || current === 'idle') nodeStatus[id] = 'skipped';
    else if (current === 'running' || current === 'paused') nodeStatus[id] = 'cancelled';
  }
  return { ...view, status, nodeStatus, activeEdges: [], waiting: null };
}

/** A stored run as the canvas shows it: its events replayed, then its stored outputs. */
export function runViewFromDetail(detail: RunDetail, runnableNodeIds: readonly string[]): RunView {
  const context: RunContext = { edges: canvasFlow(detail.flow).edges, runnableNodeIds };
  const view = reduceRunEvents(emptyRunView(context), detail.events);
  const stored: RunView = {
    ...view,
    runId: detail.run.summary.id,
    outputs: { ...view.outputs, ...outputsOf(detail.nodeOutputs) },
    error: detail.run.error ?? view.error,
    result: detail.run.result ?? view.result,
  };
  // The store has the last word on where the run stands (a run cut off by a crash has no
  // `run_end`).
  if (detail.run.summary.status === 'paused') {
    const promptNode = promptNodeOf(detail.waiting);
    return {
      ...stored,
      status: 'paused',
      waiting: detail.waiting,
      nodeStatus: promptNode ? { ...stored.nodeStatus, [promptNode]: 'paused' } : stored.nodeStatus,
    };
  }
  if (detail.run.summary.status === 'interrupted') return interruptRun(stored);
  return finishRun(stored, detail.run.summary.status);
}

/**
 * A run whose process stopped before it ended: the steps that were going were cut off; what
 * it never reached may still run when it is continued.
 */
function interruptRun(view: RunView): RunView {
  const nodeStatus = { ...view.nodeStatus };
  for (const [id, status] of Object.entries(nodeStatus)) {
    if (status === 'running' || status === 'paused') nodeStatus[id] = 'cancelled';
  }
  return { ...view, status: 'interrupted', nodeStatus, activeEdges: [], waiting: null };
}

function outputsOf(records: readonly NodeOutputRecord[]): Record<string, string> {
  const outputs: Record<string, string> = {};
  for (const record of records) {
    if (record.output === null || record.output === undefined) continue;
    outputs[record.nodeId] =
      typeof record.output === 'string' ? record.output : JSON.stringify(record.output, null, 2);
  }
  return outputs;
}

function parseRunEnd(content: string): { status?: RunStatus; result?: unknown; error?: string } {
  try {
    const parsed = JSON.parse(content) as { status?: RunStatus; result?: unknown; error?: string | null };
    return { status: parsed.status, result: parsed.result, error: parsed.error ?? undefined };
  } catch {
    return {};
  }
}

/** The node with no incoming execution edge at all (the start node) gets the run's input. */
function isEntry(view: RunView, nodeId: string): boolean {
  return !view.context.edges.some((edge) => edge.target === nodeId && !isSubagentEdge(edge));
}

function union(a: readonly string[], b: readonly string[]): string[] {
  if (b.every((id) => a.includes(id))) return a as string[];
  return [...new Set([...a, ...b])];
}

// ---------------------------------------------------------------------------------------

/** Schedules a batch flush; the browser's next frame in the app, synchronous in tests. */
export type Scheduler = (flush: () => void) => void;

const nextFrame: Scheduler = (flush) => {
  if (typeof requestAnimationFrame === 'function') requestAnimationFrame(() => flush());
  else setTimeout(flush, 16);
};

/**
 * Holds the run view shown on the canvas. Events arriving from a run are batched per frame:
 * a model streaming hundreds of tokens a second re-renders the canvas once a frame.
 */
export class RunStore {
  private view: RunView = emptyRunView();
  private pending: RunEvent[] = [];
  private scheduled = false;
  private listeners = new Set<() => void>();

  constructor(private readonly schedule: Scheduler = nextFrame) {}

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  getSnapshot = (): RunView => this.view;

  /** Shows a fresh run of a flow with `context`. */
  begin(context: RunContext): void {
    this.pending = [];
    this.set({ ...emptyRunView(context), status: 'running' });
  }

  /**
   * Shows a partial run ("run from here", "run this node"): every node keeps what the run
   * shown until now gave it (status, input, output, stream) until this run reaches it again.
   */
  beginFrom(context: RunContext): void {
    this.flush();
    const before = this.view;
    this.pending = [];
    this.set({
      ...emptyRunView(context),
      status: 'running',
      nodeStatus: { ...before.nodeStatus },
      outputs: { ...before.outputs },
      inputs: { ...before.inputs },
      streams: { ...before.streams },
    });
  }

  /** Continues the shown run (a resume, or an interrupted run continued): its events append
   * to the same view. */
  resume(): void {
    this.flush();
    this.set({ ...goneOnFromStopAfter(this.view), status: 'running', waiting: null });
  }

  push(event: RunEvent): void {
    this.pending.push(event);
    if (this.scheduled) return;
    this.scheduled = true;
    this.schedule(() => this.flush());
  }

  flush(): void {
    this.scheduled = false;
    if (this.pending.length === 0) return;
    const events = this.pending;
    this.pending = [];
    this.set(reduceRunEvents(this.view, events));
  }

  /** Names the run shown, as its start command answered (its `run_start` may come first). */
  named(runId: string): void {
    if (this.view.runId === null) this.set({ ...this.view, runId });
  }

  /** A run that could not start or resume (the command failed). */
  fail(message: string): void {
    this.flush();
    if (this.view.status === 'running' && this.view.runId === null) {
      // Nothing ran: show nothing rather than a failed run.
      this.set(emptyRunView(this.view.context));
      return;
    }
    this.set({ ...this.view, error: message });
  }

  /** Shows `view` (a stored run, or the live one again). */
  show(view: RunView): void {
    this.pending = [];
    this.set(view);
  }

  private set(view: RunView): void {
    this.view = view;
    for (const listener of [...this.listeners]) listener();
  }
}

// ---------------------------------------------------------------------------------------

/** One row of the log: one event, or a node's consecutive streamed tokens merged. */
export interface LogRow {
  key: string;
  seq: number;
  /** The last event merged into this row (`seq` when it is one event). */
  lastSeq: number;
  ts: string;
  type: RunEvent['type'];
  nodeId: string | null;
  scope: string | null;
  item: number | null;
  content: string;
  /** On a `run_end` row: how the run ended, to colour it. */
  status: RunStatus | null;
  /**
   * What a collapsed tool row reads: `files/read_file {"path":"a.txt"}`, `files/read_file
   * (12 ms) → …`; the row opens on the event's JSON.
   */
  summary: string | null;
}

/** The parsed JSON of an event's content, or `null`. */
function parsedContent(content: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(content);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Tool events in words, naming the tool (a result names it by its call's id). */
function toolSummary(type: string, content: string, tools: Map<string, string>): string | null {
  if (type !== 'tool_call' && type !== 'tool_result' && type !== 'tool_error') return null;
  const event = parsedContent(content);
  if (!event) return null;
  const callId = typeof event.callId === 'string' ? event.callId : '';
  const named = typeof event.server === 'string' && typeof event.tool === 'string' ? `${event.server}/${event.tool}` : null;
  if (named && callId) tools.set(callId, named);
  const tool = named ?? tools.get(callId) ?? 'tool';
  const took = typeof event.durationMs === 'number' ? ` (${event.durationMs} ms)` : '';
  if (type === 'tool_call') return `${tool} ${JSON.stringify(event.arguments ?? {})}`;
  if (type === 'tool_error') return `${tool}${took} failed: ${String(event.error ?? content)}`;
  const failed = event.isError === true ? 'error: ' : '';
  return `${tool}${took} → ${failed}${String(event.content ?? '')}`;
}

/**
 * The log's rows: a model streaming an answer sends one `llm_delta` per token, which would
 * bury everything else; consecutive deltas of one node (and nested run) are one growing row.
 */
export function logRowsOf(events: readonly RunEvent[]): LogRow[] {
  const rows: LogRow[] = [];
  const tools = new Map<string, string>();
  for (const event of events) {
    const nodeId = event.nodeId ?? null;
    const scope = event.scope ?? null;
    const item = event.item ?? null;
    const last = rows[rows.length - 1];
    if (
      event.type === 'llm_delta' &&
      last?.type === 'llm_delta' &&
      last.nodeId === nodeId &&
      last.scope === scope &&
      last.item === item
    ) {
      rows[rows.length - 1] = { ...last, lastSeq: event.seq, content: last.content + event.content };
      continue;
    }
    rows.push({
      key: `${event.runId}:${event.seq}`,
      seq: event.seq,
      lastSeq: event.seq,
      ts: event.ts,
      type: event.type,
      nodeId,
      scope,
      item,
      content: event.content,
      status: event.type === 'run_end' ? parseRunEnd(event.content).status ?? null : null,
      summary: toolSummary(event.type, event.content, tools),
    });
  }
  return rows;
}
