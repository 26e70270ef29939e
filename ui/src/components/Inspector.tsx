// The selected node's fields, drawn from its kind's description (plus the common fields),
// and what the shown run gave it and got from it.
//
// "Latest input" is the latest output of the node execution last came from (the source of
// the incoming edge whose node finished last before this one started); for the start node
// it is the run's input. "Latest output" is the node's last `step_end`, or for a stored run
// the output the store kept for it. Below them, every visit of the node (read from the store
// by the engine: loops, forEach items, steps inside a subflow) with a picker.

import { fieldValueText } from '../flowCompare';
import { useMemo, useState } from 'react';
import type { BreakWhen, KindDescription, NodeVisit, RunEvent, Value } from '../bindings';
import { fieldsOf, kindOf, labelOf, templateNamesFor } from '../catalog';
import { costText, tokensText } from '../cost';
import { getPath } from '../flowMapping';
import { useCanvas, useRun, useSession, useSessionState } from '../hooks';
import { FieldRow } from './fields';
import { FlowMcpServers } from './McpTools';

/** A visit as the picker lists it: `visit 2`, or `visit 1 › item 0 › draft #1` for a step inside. */
export function visitLabel(visit: NodeVisit): string {
  if (visit.outerVisit === null) return `visit ${visit.visit}`;
  const inner = visit.key
    .slice(visit.nodeId.length)
    .replace(/^\[(\d+)\]/, 'item $1')
    .replace(/^\//, '')
    .replaceAll('/', ' › ');
  return `visit ${visit.outerVisit} › ${inner} #${visit.visit}`;
}

/** A value as the inspector shows it: text as it is, anything else as indented JSON. */
function shownValue(value: Value | null): string {
  if (value === null) return '—';
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

function millisText(ms: number | null): string | null {
  if (ms === null) return null;
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/** What one visit did: status, time, LLM calls, tokens and cost. */
function visitFacts(visit: NodeVisit): string {
  const facts: string[] = [visit.status.replace('_', ' ')];
  const took = millisText(visit.durationMs);
  if (took) facts.push(took);
  if (visit.cost.calls > 0) {
    facts.push(`${visit.cost.calls === 1 ? '1 LLM call' : `${visit.cost.calls} LLM calls`}`);
    facts.push(`tokens ${tokensText(visit.cost)}`);
    facts.push(`cost ${costText(visit.cost)}`);
  }
  if (visit.models.length > 0) facts.push(`answered by ${visit.models.join(', ')}`);
  return facts.join(' · ');
}

/**
 * Every visit of the node in the run shown (loops, forEach items, steps inside a subflow), one
 * picked at a time: its input, output, time, tokens and cost. A past run's visit can be pinned.
 */
function Visits({ nodeId, visits, readOnly }: { nodeId: string; visits: NodeVisit[]; readOnly: boolean }) {
  const session = useSession();
  const own = visits.filter((visit) => visit.outerVisit === null);
  const latest = own.length > 0 ? visits.indexOf(own[own.length - 1]) : visits.length - 1;
  const [picked, setPicked] = useState<number | null>(null);
  const index = picked !== null && picked < visits.length ? picked : latest;
  const visit = visits[index];
  if (!visit) return null;
  const several = visits.length > 1;
  return (
    <section className="visits" data-testid="visits">
      {several ? (
        <div className="field">
          <label className="field-label" htmlFor={`visit-${nodeId}`}>
            Visits ({visits.length})
          </label>
          <select
            id={`visit-${nodeId}`}
            className="input"
            data-testid="visit-picker"
            value={index}
            onChange={(event) => setPicked(Number(event.target.value))}
          >
            {visits.map((candidate, position) => (
              <option key={`${candidate.key}#${candidate.outerVisit ?? 0}#${candidate.visit}`} value={position}>
                {visitLabel(candidate)}
              </option>
            ))}
          </select>
        </div>
      ) : (
        <h3 className="section-title">This visit</h3>
      )}
      <p className="muted" data-testid="visit-facts">
        {visitFacts(visit)}
      </p>
      {several && (
        <>
          <h3 className="section-title">Input</h3>
          <pre className="run-value" data-testid="visit-input">
            {visit.input === null ? 'not known (the run began here)' : shownValue(visit.input)}
          </pre>
          <h3 className="section-title">{visit.error === null ? 'Output' : 'Error'}</h3>
          <pre className={`run-value${visit.error === null ? '' : ' error'}`} data-testid="visit-output">
            {visit.error ?? shownValue(visit.output)}
          </pre>
        </>
      )}
      {visit.toolCalls.length > 0 && (
        <>
          <h3 className="section-title">Tool calls ({visit.toolCalls.length})</h3>
          <ul className="tool-calls" data-testid="visit-tool-calls">
            {visit.toolCalls.map((call, position) => (
              <li key={position} className={call.isError ? 'error' : undefined}>
                <code>
                  {call.server}/{call.tool}
                </code>{' '}
                {JSON.stringify(call.arguments)}
                {millisText(call.durationMs) && ` · ${millisText(call.durationMs)}`}
                {' · '}
                {call.error !== null
                  ? `failed: ${call.error}`
                  : call.result === null
                    ? 'no result'
                    : `${call.isError ? 'error: ' : ''}${call.result}`}
              </li>
            ))}
          </ul>
        </>
      )}
      {readOnly && several && visit.outerVisit === null && visit.output !== null && (
        <button
          type="button"
          className="button small"
          data-testid="pin-visit"
          title="Pin this visit's output for the edited flow: its next runs do not run this node"
          onClick={() => void session.pinFromViewed(nodeId, visit.output)}
        >
          Pin this visit's output
        </button>
      )}
    </section>
  );
}

const NO_VISITS: NodeVisit[] = [];

/** The latest decision taken at `nodeId` (its `input_received` event), or null. */
function lastDecision(events: RunEvent[], nodeId: string): RunEvent | null {
  for (let index = events.length - 1; index >= 0; index--) {
    const event = events[index];
    if (event.type === 'input_received' && event.nodeId === nodeId && !event.scope) return event;
  }
  return null;
}

/** `approve by ada at 14:05 — looks fine`, from a decision's event (its time is the event's). */
export function decisionText(event: RunEvent): string {
  const at = new Date(event.ts);
  const when = `at ${Number.isNaN(at.getTime()) ? event.ts : at.toLocaleString()}`;
  try {
    const decision = JSON.parse(event.content) as Record<string, unknown>;
    const parts = [String(decision.decision ?? '')];
    if (typeof decision.by === 'string' && decision.by) parts.push(`by ${decision.by}`);
    parts.push(when);
    const note = typeof decision.note === 'string' && decision.note ? ` — ${decision.note}` : '';
    return `${parts.join(' ')}${note}`;
  } catch {
    return `${event.content} ${when}`;
  }
}

function RunData({ nodeId, readOnly }: { nodeId: string; readOnly: boolean }) {
  const input = useRun((view) => view.inputs[nodeId]);
  const output = useRun((view) => view.outputs[nodeId]);
  const error = useRun((view) => view.nodeErrors[nodeId]);
  const hasRun = useRun((view) => view.status !== null);
  // What each node's LLM calls cost (all visits, items and subagents), live or stored.
  const cost = useSessionState((state) => state.visits?.cost.nodes[nodeId] ?? state.viewing?.cost.nodes[nodeId]);
  const allVisits = useSessionState((state) => state.visits?.visits ?? NO_VISITS);
  const runId = useRun((view) => view.runId);
  const visits = useMemo(() => allVisits.filter((visit) => visit.nodeId === nodeId), [allVisits, nodeId]);
  const decided = useRun((view) => lastDecision(view.events, nodeId));
  if (!hasRun) return null;
  return (
    <section className="run-data">
      {decided && (
        <p data-testid="node-decision">
          <strong>Decision:</strong> {decisionText(decided)}
        </p>
      )}
      {cost && cost.calls > 0 && (
        <p className="muted" data-testid="node-cost">
          {cost.calls === 1 ? '1 LLM call' : `${cost.calls} LLM calls`} · tokens {tokensText(cost)} · cost {costText(cost)}
        </p>
      )}
      <h3 className="section-title">Latest input</h3>
      <pre className="run-value" data-testid="node-input">
        {input ?? '—'}
      </pre>
      <h3 className="section-title">Latest output</h3>
      <pre className="run-value" data-testid="node-output">
        {output ?? '—'}
      </pre>
      {error && (
        <>
          <h3 className="section-title">Error</h3>
          <pre className="run-value error" data-testid="node-error">
            {error}
          </pre>
        </>
      )}
      {visits.length > 0 && <Visits key={`${runId}:${nodeId}`} nodeId={nodeId} visits={visits} readOnly={readOnly} />}
    </section>
  );
}

const PARTIAL_RUNS = [
  {
    testId: 'run-from-here',
    text: '▶ Run from here',
    help: 'Run this node and what follows it, reusing the outputs of the run shown',
    only: false,
  },
  {
    testId: 'run-this-node',
    text: 'Run this node',
    help: 'Run only this node, with the input the run shown gave it',
    only: true,
  },
];

/** "Run from here" and "Run this node": re-run part of the flow with the shown run's outputs. */
function PartialRunButtons({ nodeId }: { nodeId: string }) {
  const session = useSession();
  // Subscribed so the reason is recomputed when the run or the problems change.
  useRun((view) => view.status);
  useSessionState((state) => state.problems);
  useSessionState((state) => state.busy);
  const blocked = session.partialRunBlockedReason();
  return (
    <div className="partial-run">
      {PARTIAL_RUNS.map(({ testId, text, help, only }) => (
        <button
          key={testId}
          type="button"
          className="button small"
          data-testid={testId}
          disabled={blocked !== null}
          title={blocked ?? help}
          onClick={() => void session.startRun('', { nodeId, only })}
        >
          {text}
        </button>
      ))}
    </div>
  );
}

/**
 * Whether nodes of `kind` can be pinned: those that go on by their `output` handle (an `if` or an
 * approval routes by running; an `output` is the result). An unknown kind is left to the engine.
 */
function pinnable(kind: KindDescription | undefined): boolean {
  if (!kind) return true;
  return kind.id !== 'output' && kind.handles.some((handle) => handle.id === 'output');
}

/**
 * A pinned output: in the edited flow, the pin (Unpin) or a JSON value to pin; for a past run's
 * node, "Pin this output" pins what it gave into the edited flow.
 */
function PinField({ nodeId, readOnly }: { nodeId: string; readOnly: boolean }) {
  const session = useSession();
  const flowPath = useCanvas((state) => state.path);
  const pin = useSessionState((state) => state.pins[flowPath ?? '']?.[nodeId]);
  const stored = useSessionState((state) => state.viewing?.nodeOutputs.find((output) => output.nodeId === nodeId));
  const [typed, setTyped] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  if (readOnly) {
    if (!stored || stored.output === null) return null;
    return (
      <button
        type="button"
        className="button small"
        data-testid="pin-output"
        title="Pin this output for the edited flow: its next runs do not run this node"
        onClick={() => void session.pinFromViewed(nodeId)}
      >
        Pin this output
      </button>
    );
  }
  if (pin !== undefined) {
    return (
      <div className="field pin-field">
        <span className="field-label">Pinned output (the node does not run)</span>
        <pre className="run-value" data-testid="pinned-value">
          {typeof pin === 'string' ? pin : JSON.stringify(pin, null, 2)}
        </pre>
        <button type="button" className="button small" data-testid="unpin" onClick={() => void session.setPin(nodeId, undefined)}>
          Unpin
        </button>
      </div>
    );
  }
  const pinTyped = () => {
    try {
      void session.setPin(nodeId, JSON.parse(typed));
      setTyped('');
      setProblem(null);
    } catch (error) {
      setProblem(`Not JSON: ${(error as Error).message}. A text goes in quotes: "like this".`);
    }
  };
  return (
    <div className="field pin-field">
      <span className="field-label">Pin an output</span>
      <input
        className="input mono"
        data-testid="pin-value"
        placeholder='JSON: "a text" or {"label": "bug"}'
        value={typed}
        onChange={(event) => setTyped(event.target.value)}
      />
      {problem && <div className="field-error">{problem}</div>}
      <button type="button" className="button small" data-testid="pin-typed" disabled={typed.trim() === ''} onClick={pinTyped}>
        Pin
      </button>
    </div>
  );
}

/** Where the next run stops at this node (F9 toggles "before"): debugging state, not the flow's. */
function BreakpointField({ nodeId, callsTools }: { nodeId: string; callsTools: boolean }) {
  const session = useSession();
  const flowPath = useCanvas((state) => state.path);
  const breakpoint = useSessionState((state) => state.breakpoints[flowPath ?? '']?.[nodeId]);
  const when = breakpoint?.when ?? null;
  return (
    <div className="field breakpoint-field">
      <label className="field-label" htmlFor={`breakpoint-${nodeId}`}>
        Breakpoint
      </label>
      <select
        id={`breakpoint-${nodeId}`}
        className="input"
        data-testid="breakpoint-when"
        value={when ?? 'none'}
        onChange={(event) => {
          const value = event.target.value;
          session.setBreakpoint(nodeId, value === 'none' ? null : (value as BreakWhen), breakpoint?.condition ?? '');
        }}
      >
        <option value="none">none</option>
        <option value="before">stop before it runs</option>
        <option value="after">stop after it ran</option>
        {(callsTools || when === 'tool') && <option value="tool">stop before tool calls</option>}
      </select>
      {when && (
        <input
          className="input mono"
          data-testid="breakpoint-condition"
          placeholder="only when… (e.g. visit == 3)"
          value={breakpoint?.condition ?? ''}
          onChange={(event) => session.setBreakpoint(nodeId, when, event.target.value)}
        />
      )}
    </div>
  );
}

/** What changed in this node since the version the open flow is compared with. */
function ComparedChanges({ nodeId }: { nodeId: string }) {
  const compared = useSessionState((state) => state.flowCompare);
  const mark = compared?.marks[nodeId];
  if (!compared || !mark) return null;
  const fields = compared.fields[nodeId] ?? [];
  return (
    <section className="compared-changes" data-testid="compared-changes" data-mark={mark}>
      <h3 className="section-title">
        {mark === 'added' ? `Not in ${compared.label}` : `Changed since ${compared.label}`}
      </h3>
      {fields.length > 0 && (
        <ul>
          {fields.map((change) => (
            <li key={change.field} data-testid="compared-field" data-field={change.field}>
              <code>{change.field}</code>: <span className="diff-removed">{one(fieldValueText(change.a))}</span> →{' '}
              <span className="diff-added">{one(fieldValueText(change.b))}</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** A value on one line, cut where it would fill the panel. */
function one(text: string): string {
  const line = text.replace(/\s+/g, ' ');
  return line.length > 120 ? `${line.slice(0, 119)}…` : line;
}

export function Inspector() {
  const session = useSession();
  const catalog = useSessionState((state) => state.catalog);
  const viewing = useSessionState((state) => state.viewing);
  const viewSelection = useSessionState((state) => state.viewSelection);
  const editedFlow = useCanvas((state) => state.flow);
  const selection = useCanvas((state) => state.selection);

  const flow = viewing?.flow ?? editedFlow;
  const readOnly = viewing !== null;
  const selectedIds = readOnly ? (viewSelection ? [viewSelection] : []) : selection.nodes;
  const node = selectedIds.length === 1 ? flow.nodes.find((candidate) => candidate.id === selectedIds[0]) : undefined;

  if (!node) {
    return (
      <div className="inspector" data-testid="inspector">
        {selectedIds.length > 1 ? (
          <p className="muted">{selectedIds.length} nodes selected.</p>
        ) : (
          <>
            <div className="field">
              <label className="field-label" htmlFor="flow-name">
                Flow name
              </label>
              <input
                id="flow-name"
                className="input"
                data-testid="flow-name"
                value={flow.name ?? ''}
                readOnly={readOnly}
                onChange={(event) => session.canvas.setFlowName(event.target.value)}
              />
            </div>
            <FlowMcpServers readOnly={readOnly} />
            <p className="muted">Select a node to edit its fields.</p>
          </>
        )}
        {selection.edges.length > 0 && !readOnly && selectedIds.length === 0 && (
          <p className="muted">
            {selection.edges.length === 1 ? `Edge ${selection.edges[0]}` : `${selection.edges.length} edges`} selected;
            Delete removes {selection.edges.length === 1 ? 'it' : 'them'}.
          </p>
        )}
      </div>
    );
  }

  const kind = kindOf(catalog, node.type);
  const fields = catalog ? fieldsOf(catalog, kind) : [];
  const templateNames = catalog ? templateNamesFor(catalog, flow, node.id) : [];

  return (
    <div className="inspector" data-testid="inspector" data-node-id={node.id}>
      <header className="inspector-header">
        <div className="inspector-title">{labelOf(node)}</div>
        <div className="muted">
          {kind?.title ?? node.type} · <code>{node.id}</code>
        </div>
        {kind?.help && (
          <p className="kind-help" data-testid="kind-help">
            {kind.help}
          </p>
        )}
        {!kind && <p className="field-error">The engine does not know the kind “{node.type}”.</p>}
        {readOnly && <p className="muted">A past run's flow: read only.</p>}
        {!readOnly && kind && <PartialRunButtons nodeId={node.id} />}
        {!readOnly && kind && <BreakpointField nodeId={node.id} callsTools={node.type === 'agent'} />}
        {pinnable(kind) && <PinField nodeId={node.id} readOnly={readOnly} />}
        {!readOnly && <ComparedChanges nodeId={node.id} />}
      </header>
      {fields.map((field) => (
        <FieldRow
          key={`${node.id}:${field.name}`}
          field={field}
          value={getPath(node.data, field.name)}
          onChange={(value) => session.canvas.setNodeField(node.id, field.name, value)}
          readOnly={readOnly}
          templateNames={templateNames}
        />
      ))}
      <RunData nodeId={node.id} readOnly={readOnly} />
    </div>
  );
}
