// Past runs from the store (runs of `weft` in the same store too) and from the team's servers
// (Settings → Servers, each run marked with its server), with what each cost. Opening one shows
// its flow, replayed statuses, log and outputs on the canvas (a server's run still going is
// followed live); the edited flow stays as it was. Two checked runs can be compared node by node
// (a server's with a local one too), a local run shown can be replayed, and it can become a test
// case. Beside the runs, the open file's versions (VersionsPanel).

import { useEffect, useState } from 'react';
import { SHORT_HASH, type Cost, type EdgeName, type FlowDiff, type NodeComparison, type NodeRun, type RunRef, type RunSide, type Trigger } from '../bindings';
import { costText, tokensText } from '../cost';
import { useRun, useSession, useSessionState } from '../hooks';
import { runKey, type HistoryEntry } from '../session';
import { ServerProblems } from './ServerProblems';
import { TestDraftEditor } from './TestsPanel';
import { VersionsPanel } from './VersionsPanel';

function durationOf(startedAt: string, endedAt: string | null | undefined): string {
  if (!endedAt) return '—';
  const ms = new Date(endedAt).getTime() - new Date(startedAt).getTime();
  if (!Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** What started a run, as History says it: `schedule`, `api (ci)`, or the person who ran it. */
function triggerText(trigger: Trigger): string {
  if (trigger.kind === 'manual') return trigger.by ?? 'manual';
  return trigger.by ? `${trigger.kind} (${trigger.by})` : trigger.kind;
}

function startOf(startedAt: string): string {
  const date = new Date(startedAt);
  return Number.isNaN(date.getTime()) ? startedAt : date.toLocaleString();
}

function millisText(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function both(a: string, b: string): string {
  return a === b ? a : `${a} | ${b}`;
}

function statusText(node: NodeRun): string {
  return node.status.replace('_', ' ');
}

/** The lines or paths where two outputs differ. */
function OutputChanges({ node }: { node: NodeComparison }) {
  const diff = node.diff;
  if (!diff) return null;
  if (diff.kind === 'text') {
    return (
      <pre className="compare-diff" data-testid="compare-diff">
        {diff.lines
          .filter((line) => line.kind !== 'same')
          .map((line, index) => (
            <div key={index} className={`diff-${line.kind}`}>
              {line.kind === 'removed' ? '- ' : '+ '}
              {line.text}
            </div>
          ))}
      </pre>
    );
  }
  return (
    <pre className="compare-diff" data-testid="compare-diff">
      {diff.changes.map((change, index) => (
        <div key={index}>
          {change.path}: <span className="diff-removed">{change.a === undefined ? '(none)' : JSON.stringify(change.a)}</span> →{' '}
          <span className="diff-added">{change.b === undefined ? '(none)' : JSON.stringify(change.b)}</span>
        </div>
      ))}
      {diff.truncated && <div className="muted">… more changes</div>}
    </pre>
  );
}

/** What a run's LLM calls cost, in words: a dash alone reads like a typo. */
function costWords(cost: Cost): string {
  return cost.calls === 0 ? 'no LLM calls' : costText(cost);
}

/** One side of a comparison: which run, and how it went. */
function edgeText(edge: EdgeName): string {
  return `${edge.source}${edge.sourceHandle === 'output' ? '' : `.${edge.sourceHandle}`} → ${edge.target}`;
}

/** What changed in the flow between the two runs, above their outputs: it may be why they differ. */
function FlowChanges({ diff }: { diff: FlowDiff }) {
  const lines: { sign: string; text: string }[] = [
    ...diff.flow.map((change) => ({ sign: '~', text: `flow ${change.field}` })),
    ...diff.settings.map((change) => ({ sign: '~', text: `settings.${change.field}` })),
    ...diff.nodesAdded.map((node) => ({ sign: '+', text: `node ${node.id} (${node.type})` })),
    ...diff.nodesRemoved.map((node) => ({ sign: '−', text: `node ${node.id} (${node.type})` })),
    ...diff.nodesChanged.map((change) => ({
      sign: '~',
      text: `node ${change.node.id}: ${change.fields.map((field) => field.field).join(', ')}`,
    })),
    ...diff.edgesAdded.map((edge) => ({ sign: '+', text: `edge ${edgeText(edge)}` })),
    ...diff.edgesRemoved.map((edge) => ({ sign: '−', text: `edge ${edgeText(edge)}` })),
  ];
  if (diff.nodesMoved.length > 0) lines.push({ sign: '·', text: `moved: ${diff.nodesMoved.map((node) => node.id).join(', ')}` });
  return (
    <div className="compare-flow" data-testid="compare-flow-changes">
      <strong>B ran another version of the flow</strong> (<code>weft flow-diff {'A B'}</code> shows each field):
      <ul>
        {lines.map((line, index) => (
          <li key={index} data-sign={line.sign}>
            <span className="mono">{line.sign}</span> {line.text}
          </li>
        ))}
      </ul>
    </div>
  );
}

function CompareSide({ side, label, run, when }: { side: 'a' | 'b'; label: string; run: RunSide; when: string }) {
  return (
    <div className="compare-side" data-testid={`compare-${side}`} data-run-id={run.id}>
      <strong className="compare-letter">{label}</strong> {when} · <code>{run.id.slice(0, 8)}</code> · {run.status} ·{' '}
      {millisText(run.durationMs)} · {costWords(run.cost)}
    </div>
  );
}

/**
 * Two runs side by side, over the canvas (a diff needs the room): a verdict, then per node
 * status, time, tokens, cost and output. A is the earlier run of the two.
 */
export function CompareView() {
  const session = useSession();
  const comparison = useSessionState((state) => state.comparison);
  if (!comparison) return null;
  const differing = comparison.nodes.filter((node) => !node.sameOutput).length;
  return (
    <section className="compare" data-testid="compare" data-equal={comparison.equal ? 'true' : 'false'} aria-label="Two runs compared">
      <div className="compare-head">
        <strong data-testid="compare-verdict">
          {comparison.equal
            ? `Same outputs at all ${comparison.nodes.length} nodes`
            : `Outputs differ at ${differing} of ${comparison.nodes.length} nodes`}
        </strong>
        <button type="button" className="button small" data-testid="compare-close" onClick={() => session.closeComparison()}>
          Close
        </button>
      </div>
      <CompareSide side="a" label="A" run={comparison.a} when="earlier" />
      <CompareSide side="b" label="B" run={comparison.b} when="later" />
      {comparison.flowChanges && <FlowChanges diff={comparison.flowChanges} />}
      <table className="compare-table">
        <thead>
          <tr>
            <th>Node</th>
            <th>Status A | B</th>
            <th>Time</th>
            <th>Tokens</th>
            <th>Cost</th>
            <th>Output</th>
          </tr>
        </thead>
        <tbody>
          {comparison.nodes.map((node) => (
            <tr key={node.node} data-testid="compare-row" data-node={node.node} data-same={node.sameOutput ? 'true' : 'false'}>
              <td className="mono">{node.node}</td>
              <td>{both(statusText(node.a), statusText(node.b))}</td>
              <td>{both(millisText(node.a.durationMs), millisText(node.b.durationMs))}</td>
              <td>{both(tokensText(node.a.cost), tokensText(node.b.cost))}</td>
              <td>{both(costText(node.a.cost), costText(node.b.cost))}</td>
              <td>
                {node.sameOutput ? <span className="muted">same</span> : <span className="status-paused">differs</span>}
                <OutputChanges node={node} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** The two checked runs, the earlier first: a comparison reads from before to after,
 *  whichever was checked first. */
function earlierFirst(checked: string[], history: HistoryEntry[]): [RunRef, RunRef] {
  const entry = (key: string) => history.find((run) => runKey(run) === key);
  const started = (key: string) => Date.parse(entry(key)?.startedAt ?? '') || 0;
  const refOf = (key: string): RunRef => {
    const run = entry(key);
    return run ? { id: run.id, server: run.server ?? null } : { id: key, server: null };
  };
  const [first, second] = checked;
  return started(second) < started(first) ? [refOf(second), refOf(first)] : [refOf(first), refOf(second)];
}

const HISTORY_POLL_MS = 1_000;

const VIEW_LABELS = { runs: 'Runs', versions: 'Versions', servers: 'Server flows' } as const;

/** History: the runs of the store and the team's servers, the open file's versions, or the servers' flows. */
export function HistoryPanel() {
  const [shown, setShown] = useState<keyof typeof VIEW_LABELS>('runs');
  return (
    <>
      <div className="history-views" role="tablist">
        {(['runs', 'versions', 'servers'] as const).map((view) => (
          <button
            key={view}
            type="button"
            role="tab"
            aria-selected={shown === view}
            className={`button small ${shown === view ? 'primary' : ''}`}
            data-testid={`history-${view}`}
            onClick={() => setShown(view)}
          >
            {VIEW_LABELS[view]}
          </button>
        ))}
      </div>
      {shown === 'runs' && <RunsList />}
      {shown === 'versions' && <VersionsPanel />}
      {shown === 'servers' && <ServerFlowsList />}
    </>
  );
}

/**
 * The flows of the team's servers (Settings → Servers): one opened goes on the canvas, and Run
 * then runs it on its server, with the breakpoints and pins set here, followed live.
 */
function ServerFlowsList() {
  const session = useSession();
  const listed = useSessionState((state) => state.serverFlows);
  const origin = useSessionState((state) => state.serverFlow);
  useEffect(() => {
    void session.loadServerFlows();
  }, [session]);
  return (
    <div className="history" data-testid="server-flows">
      <div className="history-toolbar">
        <button type="button" className="button small" data-testid="server-flows-refresh" onClick={() => void session.loadServerFlows()}>
          Refresh
        </button>
      </div>
      <ServerProblems problems={listed?.problems ?? []} testId="server-flows-problem" />
      {listed && listed.flows.length === 0 && listed.problems.length === 0 && (
        <p className="muted">No flows: add a team's server in Settings → Servers.</p>
      )}
      <ul className="history-list">
        {listed?.flows.map((flow) => {
          const current = origin?.server === flow.server && origin.name === flow.name;
          return (
            <li key={`${flow.server}/${flow.name}`} className="history-item">
              <button
                type="button"
                className={`history-row ${current ? 'current' : ''}`}
                data-testid="server-flow"
                data-server={flow.server}
                data-name={flow.name}
                disabled={flow.error !== undefined && flow.error !== null}
                title={flow.error ?? `Open ${flow.name} of ${flow.server}: Run runs it there`}
                onClick={() => void session.openServerFlow(flow.server, flow.name)}
              >
                <span className="history-name">
                  <span className="server-badge">{flow.server}</span>
                  {flow.title || flow.name}
                </span>
                <span className="history-id muted mono">{flow.version ? flow.version.slice(0, SHORT_HASH) : ''}</span>
                <span className="history-meta muted">{flow.error ? `does not load: ${flow.error}` : `${flow.name}.json`}</span>
              </button>
            </li>
          );
        })}
      </ul>
    </div>
  );
}

function RunsList() {
  const session = useSession();
  const history = useSessionState((state) => state.history);
  const costs = useSessionState((state) => state.historyCosts);
  const problems = useSessionState((state) => state.historyProblems);
  const viewing = useSessionState((state) => state.viewing);
  const busy = useSessionState((state) => state.busy);
  const [checked, setChecked] = useState<string[]>([]);
  const toggle = (key: string) =>
    setChecked((now) => (now.includes(key) ? now.filter((checkedKey) => checkedKey !== key) : [...now.slice(-1), key]));
  // Subscribed so that the blocked reason below is recomputed when these change.
  useSessionState((state) => state.busy);
  useRun((view) => view.status);
  const viewingKey = useSessionState((state) =>
    state.viewing ? runKey({ id: state.viewing.run.summary.id, server: state.viewing.server }) : null,
  );
  const shownRunId = useRun((view) => view.runId);
  const viewingServerRun = useSessionState((state) => state.viewing?.server ?? null);
  const blocked = session.openRunBlockedReason();
  const caseBlocked = session.caseFromViewedBlockedReason();

  // The list is read again each time the tab opens (runs of `weft` appear too).
  useEffect(() => {
    void session.refreshHistory();
  }, [session]);
  // While a listed run is still going (one left behind by opening another flow, or one of
  // `weft`), the list is read again each second so that its end shows without a Refresh.
  const anyGoing = history.some((run) => run.status === 'running');
  useEffect(() => {
    if (!anyGoing) return;
    const timer = setInterval(() => void session.refreshHistory(), HISTORY_POLL_MS);
    return () => clearInterval(timer);
  }, [anyGoing, session]);

  return (
    <div className="history" data-testid="history">
      <div className="history-toolbar">
        <button type="button" className="button small" data-testid="history-refresh" onClick={() => void session.refreshHistory()}>
          Refresh
        </button>
        <button
          type="button"
          className="button small"
          data-testid="history-compare"
          disabled={checked.length !== 2}
          title="Compare the two checked runs node by node"
          onClick={() => void session.compareRuns(...earlierFirst(checked, history))}
        >
          Compare
        </button>
        <button
          type="button"
          className="button small"
          data-testid="history-replay"
          disabled={!viewing || busy || viewingServerRun !== null}
          title={
            viewingServerRun
              ? `A run of server ${viewingServerRun}: its recorded answers are kept there`
              : 'Run the edited flow with the LLM answers the run shown recorded: only what changed goes live'
          }
          onClick={() => void session.replayViewed()}
        >
          Replay
        </button>
        <button
          type="button"
          className="button small"
          data-testid="history-save-case"
          disabled={caseBlocked !== null}
          title={caseBlocked ?? 'Make a test case of the run shown: its input, decisions and outputs as expectations'}
          onClick={() => void session.draftCaseFromViewed()}
        >
          Save as test case
        </button>
        {blocked && <span className="muted">{blocked}</span>}
      </div>
      <TestDraftEditor />
      <ServerProblems problems={problems} testId="history-problem" />
      {history.length === 0 && <p className="muted">No runs yet.</p>}
      <ul className="history-list">
        {history.map((run) => {
          const key = runKey(run);
          const server = run.server ?? null;
          return (
            <li key={key} className="history-item">
              <input
                type="checkbox"
                className="history-check"
                data-testid="history-check"
                aria-label={`Compare run ${run.id.slice(0, 8)}${server ? ` of ${server}` : ''}`}
                checked={checked.includes(key)}
                onChange={() => toggle(key)}
              />
              <button
                type="button"
                className={`history-row status-${run.status} ${key === viewingKey || (!server && run.id === shownRunId) ? 'current' : ''}`}
                data-testid="history-row"
                data-run-id={run.id}
                data-server={server ?? undefined}
                data-status={run.status}
                disabled={blocked !== null}
                onClick={() => void session.openRun(run.id, server)}
                title={run.flowPath ?? undefined}
              >
                <span className="history-name">
                  {server && (
                    <span className="server-badge" data-testid="history-server" title={`A run of the team's server ${server}`}>
                      {server}
                    </span>
                  )}
                  {run.flowName || 'Untitled'}
                </span>
                <span className={`run-status-chip status-${run.status}`}>{run.status}</span>
                <span className="history-meta muted">
                  {startOf(run.startedAt)} · {durationOf(run.startedAt, run.endedAt)} ·{' '}
                  <span data-testid="history-cost">{costText(costs[key])}</span>
                  {run.waitingNodeId ? ` · waits at ${run.waitingNodeId}` : ''}
                  {run.trigger && (run.trigger.kind !== 'manual' || run.trigger.by) && (
                    <span data-testid="history-trigger" title={run.trigger.occurrence ? `the occurrence of ${run.trigger.occurrence}` : undefined}>
                      {` · by ${triggerText(run.trigger)}`}
                    </span>
                  )}
                </span>
                <span className="history-id muted mono">{run.id.slice(0, 8)}</span>
              </button>
            </li>
          );
        })}
      </ul>
    </div>
  );
}
