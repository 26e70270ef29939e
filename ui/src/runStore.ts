// What the canvas shows about one run: node statuses, streamed tokens, outputs, the edges
// execution flows along, the approval it waits for, and its events for the log. The view is
// a pure fold over the run's events (`reduceRunEvent`), so a live run and a run replayed from
// the store (History) are shown by the same code.

import type {
  NodeOutputRecord,
  RunDetail,
  RunEvent,
  RunResult,
  RunStatus,
  WaitingApproval,
} from './bindings';
import { canvasFlow, isSubagentEdge, type FlowEdge } from './flowMapping';

export type NodeStatus = 'idle' | 'running' | 'done' | 'failed' | 'paused' | 'skipped';

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
  waiting: WaitingApproval | null;
  error: string | null;
  result: unknown;
  context: RunContext;
  /** Sequence numbers of each node's latest `step_start` and `step_end`, to tell which
   * incoming edge a step came by. */
  startSeq: Record<string, number>;
  endSeq: Record<string, number>;
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
    startSeq: {},
    endSeq: {},
    runInput: null,
  };
}

const ENDED: ReadonlySet<RunStatus | null> = new Set<RunStatus | null>(['completed', 'failed', 'cancelled']);

export function isRunEnded(status: RunStatus | null): boolean {
  return ENDED.has(status);
}

/** The node a waiting approval is shown at: a nested one (`sub/review`) at its subflow node. */
export function promptNodeOf(waiting: WaitingApproval | null): string | null {
  if (!waiting) return null;
  return waiting.nodeId.split('/')[0] ?? null;
}

/** Folds one event into the view (without adding it to `events`; see `reduceRunEvents`). */
export function reduceRunEvent(view: RunView, event: RunEvent): RunView {
  if (event.type === 'run_start' && !event.scope) {
    return { ...view, runId: event.runId, status: 'running', runInput: event.content };
  }
  // Events of a nested run (a subflow, a forEach item) name the child flow's nodes: they go
  // to the log but say nothing about this flow's nodes.
  if (event.scope) return view;
  const nodeId = event.nodeId ?? null;
  switch (event.type) {
    case 'step_start': {
      if (!nodeId) return view;
      const incoming = incomingEdges(view, nodeId);
      const feeder = latestSource(view, incoming);
      const inputs = { ...view.inputs };
      if (feeder !== null) inputs[nodeId] = view.outputs[feeder] ?? '';
      else if (incoming.length === 0 && view.runInput !== null && isEntry(view, nodeId)) {
        inputs[nodeId] = view.runInput;
      }
      const newEdges = incoming.map((edge) => edge.id);
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
        startSeq: { ...view.startSeq, [nodeId]: event.seq },
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
        endSeq: { ...view.endSeq, [nodeId]: event.seq },
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
        waiting: { nodeId, message: event.content },
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
 * What `startRun` or `resumeRun` answered: the final word on the run's status, and the
 * approval it waits for (a nested one's prompt goes to its subflow node).
 */
export function applyRunResult(view: RunView, result: RunResult): RunView {
  const base: RunView = {
    ...view,
    runId: result.runId,
    error: result.error ?? view.error,
    result: result.result ?? view.result,
  };
  if (result.status === 'paused') {
    const waiting = result.waiting ?? view.waiting;
    const promptNode = promptNodeOf(waiting);
    return {
      ...base,
      status: 'paused',
      waiting,
      nodeStatus: promptNode ? { ...base.nodeStatus, [promptNode]: 'paused' } : base.nodeStatus,
    };
  }
  if (result.status === 'running') return { ...base, status: 'running' };
  return finishRun(base, result.status);
}

/**
 * A finished run: nodes it never reached are skipped, steps still going were cut off (shown
 * as failed), nothing is animated any more.
 */
function finishRun(view: RunView, status: RunStatus): RunView {
  if (!isRunEnded(status)) return { ...view, status };
  const nodeStatus = { ...view.nodeStatus };
  for (const id of view.context.runnableNodeIds) {
    const current = nodeStatus[id];
    if (current === undefined || current === 'idle') nodeStatus[id] = 'skipped';
    else if (current === 'running' || current === 'paused') nodeStatus[id] = 'failed';
  }
  return { ...view, status, nodeStatus, activeEdges: [], waiting: null };
}

/** A stored run as the canvas shows it: its events replayed, then its stored outputs. */
export function runViewFromDetail(detail: RunDetail, runnableNodeIds: readonly string[]): RunView {
  const context: RunContext = { edges: canvasFlow(detail.flow).edges, runnableNodeIds };
  let view = reduceRunEvents(emptyRunView(context), detail.events);
  view = { ...view, outputs: { ...view.outputs, ...outputsOf(detail.outputs) } };
  return applyRunResult(view, {
    runId: detail.summary.id,
    status: detail.summary.status,
    result: detail.result,
    error: detail.error,
    waiting: detail.waiting,
  });
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

/** Execution edges into `nodeId` whose source finished since `nodeId` last started. */
function incomingEdges(view: RunView, nodeId: string): FlowEdge[] {
  const since = view.startSeq[nodeId] ?? 0;
  return view.context.edges.filter(
    (edge) =>
      edge.target === nodeId &&
      !isSubagentEdge(edge) &&
      (view.endSeq[edge.source] ?? -1) > since,
  );
}

/** The source among `edges` that finished last: the step execution came from. */
function latestSource(view: RunView, edges: readonly FlowEdge[]): string | null {
  let best: string | null = null;
  for (const edge of edges) {
    if (best === null || (view.endSeq[edge.source] ?? 0) > (view.endSeq[best] ?? 0)) best = edge.source;
  }
  return best;
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

  /** Continues the shown run (a resume): its events append to the same view. */
  resume(): void {
    this.flush();
    this.set({ ...this.view, status: 'running', waiting: null });
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

  /** The run's command answered: its result is the final word. */
  finish(result: RunResult): void {
    this.flush();
    this.set(applyRunResult(this.view, result));
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
}

/**
 * The log's rows: a model streaming an answer sends one `llm_delta` per token, which would
 * bury everything else; consecutive deltas of one node (and nested run) are one growing row.
 */
export function logRowsOf(events: readonly RunEvent[]): LogRow[] {
  const rows: LogRow[] = [];
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
    });
  }
  return rows;
}
