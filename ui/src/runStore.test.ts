import { describe, expect, it } from 'vitest';
import type { RunEvent } from './bindings';
import {
  RunStore,
  emptyRunView,
  logRowsOf,
  reduceRunEvents,
  type RunContext,
  type RunView,
} from './runStore';
import { event, offlineEventsAfterApprove, offlineEventsToPause, offlineFlow } from './test/fixtures';

const flow = offlineFlow();
const context: RunContext = { edges: flow.edges, runnableNodeIds: flow.nodes.map((node) => node.id) };

function replay(events: RunEvent[], view: RunView = emptyRunView(context)): RunView {
  return reduceRunEvents(view, events);
}

describe('node statuses', () => {
  it('follows the offline flow to its pause at the approval', () => {
    const view = replay(offlineEventsToPause());
    expect(view.status).toBe('paused');
    expect(view.runId).toBe('6c4ba313-67fb-4e7c-bbc7-63ab45649f30');
    expect(view.nodeStatus).toEqual({ start: 'done', summary: 'done', large: 'done', review: 'paused' });
    expect(view.waiting).toEqual({ nodeId: 'review', message: 'Ada asks for 120 EUR: parcel lost. Approve the refund?' });
  });

  it('continues after the approval, and skips the branches not taken when the run ends', () => {
    const paused = replay(offlineEventsToPause());
    const [received, ...rest] = offlineEventsAfterApprove();
    const resumed = replay([received], paused);
    expect(resumed.nodeStatus.review).toBe('running');
    expect(resumed.status).toBe('running');
    expect(resumed.waiting).toBeNull();

    const done = replay(rest, resumed);
    expect(done.status).toBe('completed');
    expect(done.nodeStatus).toEqual({
      start: 'done',
      summary: 'done',
      large: 'done',
      review: 'done',
      refunded: 'done',
      result: 'done',
      declined: 'skipped',
      auto: 'skipped',
    });
    expect(done.result).toBe('Refunded 120 EUR to Ada.');
    expect(done.events).toHaveLength(18);
  });

  it('does not skip anything while the run is only paused', () => {
    const view = replay(offlineEventsToPause());
    expect(view.nodeStatus.auto).toBeUndefined();
  });

  it('marks a node failed on its error event and the run failed at its end', () => {
    const view = replay([
      event(1, 'run_start', null, 'x'),
      event(2, 'step_start', 'start', 'Request'),
      event(3, 'step_end', 'start', 'x'),
      event(4, 'step_start', 'summary', 'Summarize'),
      event(5, 'error', 'summary', 'template error: undefined value'),
      event(6, 'error', null, 'node summary failed'),
      event(7, 'run_end', null, '{"error":"node summary failed","result":null,"status":"failed"}'),
    ]);
    expect(view.nodeStatus.summary).toBe('failed');
    expect(view.nodeErrors.summary).toBe('template error: undefined value');
    expect(view.status).toBe('failed');
    expect(view.error).toBe('node summary failed');
    expect(view.nodeStatus.large).toBe('skipped');
  });

  it('shows a step cut off by cancelling as cancelled, not as running or failed', () => {
    const view = replay([
      event(1, 'run_start', null, 'x'),
      event(2, 'step_start', 'start', 'Request'),
      event(3, 'step_end', 'start', 'x'),
      event(4, 'step_start', 'summary', 'Summarize'),
      event(5, 'run_end', null, '{"error":"cancelled","result":null,"status":"cancelled"}'),
    ]);
    expect(view.status).toBe('cancelled');
    expect(view.nodeStatus.summary).toBe('cancelled');
    expect(view.activeEdges).toEqual([]);
  });

  it('reads a node stopped after as done once the run goes on, also when it was the last', () => {
    const stop = 'breakpoint after `summary` (visit 1): its output is x';
    const stopped = replay([
      event(1, 'run_start', null, 'x'),
      event(2, 'step_start', 'start', 'Request'),
      event(3, 'step_end', 'start', 'x'),
      event(4, 'step_start', 'summary', 'Summarize'),
      event(5, 'step_end', 'summary', 'x'),
      event(6, 'wait_input', 'summary', stop),
    ]);
    expect(stopped.nodeStatus.summary).toBe('paused');
    const goneOn = replay([event(7, 'step_start', 'large', 'Large?')], stopped);
    expect(goneOn.nodeStatus).toMatchObject({ summary: 'done', large: 'running' });
    expect(goneOn.waiting).toBeNull();
    const ended = replay([event(7, 'run_end', null, '{"error":null,"result":"x","status":"completed"}')], stopped);
    expect(ended.nodeStatus.summary).toBe('done');

    // Continued in the app: it reads done at once.
    const store = new RunStore(() => {});
    store.show(stopped);
    store.resume();
    expect(store.getSnapshot().nodeStatus.summary).toBe('done');
  });

  it('ignores events of nested runs for the statuses, but logs them', () => {
    const view = replay([
      event(1, 'run_start', null, 'hi'),
      event(2, 'step_start', 'start', 'start'),
      event(3, 'step_end', 'start', 'hi'),
      event(4, 'step_start', 'summary', 'sub', { from: 'start' }),
      event(5, 'step_start', 'start', 'start', { scope: 'summary' }),
      event(6, 'step_end', 'start', 'child output', { scope: 'summary' }),
      event(7, 'step_start', 'review', 'review', { scope: 'summary', from: 'start' }),
    ]);
    expect(view.nodeStatus).toEqual({ start: 'done', summary: 'running' });
    expect(view.outputs.start).toBe('hi');
    expect(view.status).toBe('running');
    expect(view.events).toHaveLength(7);
  });

  it('shows an approval inside a subflow at its subflow node, and goes on when it is answered', () => {
    const view = replay([
      event(1, 'run_start', null, 'hi'),
      event(2, 'step_start', 'start', 'start'),
      event(3, 'step_end', 'start', 'hi'),
      event(4, 'step_start', 'summary', 'sub', { from: 'start' }),
      event(5, 'wait_input', 'review', 'ok hi?', { scope: 'summary' }),
    ]);
    expect(view.status).toBe('paused');
    expect(view.nodeStatus.summary).toBe('paused');
    expect(view.waiting).toEqual({ nodeId: 'summary/review', message: 'ok hi?' });
    const resumed = replay([event(6, 'input_received', 'review', '{}', { scope: 'summary' })], view);
    expect(resumed.status).toBe('running');
    expect(resumed.nodeStatus.summary).toBe('running');
    expect(resumed.waiting).toBeNull();
  });

  it('takes a step’s input from the node its `from` names', () => {
    const view = replay([
      event(1, 'run_start', null, 'x'),
      event(2, 'step_start', 'start', 'Request'),
      event(3, 'step_end', 'start', 'from start'),
      event(4, 'step_start', 'auto', 'Auto'),
      event(5, 'step_end', 'auto', 'from auto'),
      // `result` has three incoming edges; `from` says which one this step came by.
      event(6, 'step_start', 'result', 'Result', { from: 'auto' }),
    ]);
    expect(view.inputs.result).toBe('from auto');
    expect(view.activeEdges).toEqual(['auto-output-result']);
  });
});

describe('streamed tokens', () => {
  it('concatenates deltas per node and starts over at the node’s next step', () => {
    const first = replay([
      event(1, 'run_start', null, 'x'),
      event(2, 'step_start', 'summary', 'Summarize'),
      event(3, 'llm_delta', 'summary', 'Hel'),
      event(4, 'llm_delta', 'summary', 'lo'),
      event(5, 'llm_delta', 'large', 'other'),
      event(6, 'llm_delta', 'summary', ' there', { scope: 'summary' }),
    ]);
    expect(first.streams.summary).toBe('Hello');
    expect(first.streams.large).toBe('other');
    const again = replay([event(7, 'step_start', 'summary', 'Summarize'), event(8, 'llm_delta', 'summary', 'New')], first);
    expect(again.streams.summary).toBe('New');
  });
});

describe('edges and data', () => {
  it('animates the edge into the step going on and remembers where the run went', () => {
    const events = offlineEventsToPause();
    const atSummary = replay(events.slice(0, 5));
    expect(atSummary.activeEdges).toEqual(['start-output-summary']);
    const atReview = replay(events);
    expect(atReview.activeEdges).toEqual(['large-condition-0-review']);
    expect(atReview.traversedEdges).toEqual([
      'start-output-summary',
      'summary-output-large',
      'large-condition-0-review',
    ]);
    const done = replay(offlineEventsAfterApprove(), atReview);
    expect(done.activeEdges).toEqual([]);
    expect(done.traversedEdges).not.toContain('large-false-auto');
    expect(done.traversedEdges).toContain('review-approve-refunded');
  });

  it('records each node’s latest input and output', () => {
    const view = replay([...offlineEventsToPause(), ...offlineEventsAfterApprove()]);
    expect(view.inputs.start).toBe('{"amount":120,"customer":"Ada"}');
    expect(view.inputs.summary).toBe('{"amount":120,"customer":"Ada"}');
    expect(view.outputs.refunded).toBe('Refunded 120 EUR to Ada.');
    expect(view.inputs.result).toBe('Refunded 120 EUR to Ada.');
  });
});

describe('log rows', () => {
  it('merges consecutive deltas of one node into one row', () => {
    const rows = logRowsOf([
      event(1, 'step_start', 'a', 'A'),
      event(2, 'llm_delta', 'a', 'Hel'),
      event(3, 'llm_delta', 'a', 'lo'),
      event(4, 'llm_delta', 'b', '!'),
      event(5, 'llm_response', 'a', 'Hello'),
    ]);
    expect(rows.map((row) => [row.type, row.nodeId, row.content])).toEqual([
      ['step_start', 'a', 'A'],
      ['llm_delta', 'a', 'Hello'],
      ['llm_delta', 'b', '!'],
      ['llm_response', 'a', 'Hello'],
    ]);
    expect([rows[1].seq, rows[1].lastSeq]).toEqual([2, 3]);
  });

  it('reads tool calls in words, a result named by its call', () => {
    const rows = logRowsOf([
      event(1, 'tool_call', 'a', '{"server":"files","tool":"read_file","arguments":{"path":"a.txt"},"callId":"c1"}'),
      event(2, 'tool_call', 'a', '{"server":"files","tool":"stat","arguments":{},"callId":"c2"}'),
      event(3, 'tool_result', 'a', '{"callId":"c1","content":"hello","isError":false,"durationMs":12}'),
      event(4, 'tool_error', 'a', '{"server":"files","tool":"stat","callId":"c2","error":"MCP server `files` stopped","durationMs":3}'),
      event(5, 'tool_result', 'a', '{"callId":"c9","content":"no such file","isError":true,"durationMs":1}'),
    ]);
    expect(rows.map((row) => row.summary)).toEqual([
      'files/read_file {"path":"a.txt"}',
      'files/stat {}',
      'files/read_file (12 ms) → hello',
      'files/stat (3 ms) failed: MCP server `files` stopped',
      'tool (1 ms) → error: no such file',
    ]);
    // Opened, a row shows the event as it is.
    expect(rows[0].content).toContain('"callId":"c1"');
  });
});

describe('RunStore', () => {
  it('batches events until the scheduled flush, the run ending with its run_end', () => {
    const scheduled: (() => void)[] = [];
    const store = new RunStore((flush) => scheduled.push(flush));
    store.begin(context);
    let renders = 0;
    store.subscribe(() => renders++);
    for (const e of offlineEventsToPause()) store.push(e);
    expect(store.getSnapshot().events).toHaveLength(0);
    expect(scheduled).toHaveLength(1);
    scheduled[0]();
    expect(renders).toBe(1);
    expect(store.getSnapshot().nodeStatus.review).toBe('paused');

    store.resume();
    for (const e of offlineEventsAfterApprove()) store.push(e);
    store.flush();
    const view = store.getSnapshot();
    expect(view.events.map((e) => e.seq)).toEqual([...Array(18).keys()].map((i) => i + 1));
    expect(view.status).toBe('completed');
    expect(view.nodeStatus.auto).toBe('skipped');
  });

  it('keeps what the earlier run gave the nodes a partial run does not reach', () => {
    const store = new RunStore((flush) => flush());
    store.begin(context);
    for (const e of [...offlineEventsToPause(), ...offlineEventsAfterApprove()]) store.push(e);

    // "Run this node" on `refunded`: only it runs again, with a new template.
    store.beginFrom(context);
    expect(store.getSnapshot().events).toHaveLength(0);
    expect(store.getSnapshot().nodeStatus.summary).toBe('done');
    store.push(event(1, 'run_start', null, '{}', { runId: 'second' }));
    store.push(event(2, 'step_start', 'refunded', 'Refunded', { runId: 'second' }));
    expect(store.getSnapshot().nodeStatus.refunded).toBe('running');
    store.push(event(3, 'step_end', 'refunded', 'Paid back', { runId: 'second' }));
    store.push(event(4, 'run_end', null, '{"error":null,"result":"Paid back","status":"completed"}', { runId: 'second' }));

    const view = store.getSnapshot();
    expect(view.runId).toBe('second');
    expect(view.outputs.refunded).toBe('Paid back');
    expect(view.outputs.summary).toContain('Ada asks for 120 EUR');
    expect(view.nodeStatus).toMatchObject({ start: 'done', review: 'done', refunded: 'done', declined: 'skipped' });
  });
});
