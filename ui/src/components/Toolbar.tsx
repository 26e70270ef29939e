// File commands, the flow's title with its dirty marker, the run's input, Run / Cancel and
// the run's status.

import { SHORT_HASH } from '../bindings';
import { labelOf } from '../catalog';
import { getPath } from '../flowMapping';
import { useCanvas, useLayout, useRun, useSession, useSessionState } from '../hooks';
import type { TidyArrangement } from '../tidy';
import { earliestStale, staleNodes } from '../stale';
import { budgetOf, spentText } from '../cost';
import { FitIcon } from './FitIcon';

export interface ToolbarProps {
  onNew: () => void;
  onOpen: () => void;
  onSave: () => void;
  onSaveAs: () => void;
  onFitView: () => void;
  /** Lays the flow out in the direction chosen beside the button. */
  onTidy: () => void;
  onHelp: () => void;
  input: string;
  onInput: (input: string) => void;
  onRun: () => void;
}

/** The file name of `path`, without its folders. */
export function fileNameOf(path: string | null): string {
  if (!path) return 'Untitled';
  const parts = path.split(/[\\/]/);
  return parts[parts.length - 1] || path;
}

export function Toolbar(props: ToolbarProps) {
  const session = useSession();
  const path = useCanvas((state) => state.path);
  const dirty = useCanvas((state) => state.dirty);
  const canUndo = useCanvas((state) => state.canUndo);
  const canRedo = useCanvas((state) => state.canRedo);
  const flow = useCanvas((state) => state.flow);
  const runStatus = useRun((view) => view.status);
  const runId = useRun((view) => view.runId);
  const runError = useRun((view) => view.error);
  // Subscribed so that the blocked reason below is recomputed when these change.
  useSessionState((state) => state.problems);
  useSessionState((state) => state.busy);
  useSessionState((state) => state.catalog);
  const viewing = useSessionState((state) => state.viewing !== null);
  const origin = useSessionState((state) => state.serverFlow);
  // The budget of the run shown (a past run's own flow, else the edited one's).
  const shownSettings = useSessionState((state) => state.viewing?.flow.settings);
  const budget = budgetOf(shownSettings ?? flow.settings);
  const spent = useSessionState((state) => state.visits?.cost.total);
  const over =
    budget !== null &&
    ((budget.maxCostUsd !== undefined && (spent?.usd ?? 0) >= budget.maxCostUsd) ||
      (budget.maxTokens !== undefined && (spent?.inputTokens ?? 0) + (spent?.outputTokens ?? 0) >= budget.maxTokens));
  const tidyDirection = useLayout((layout) => layout.tidyDirection);
  const across = { right: 'left to right', down: 'top down', rows: 'left to right in rows as wide as the view' }[tidyDirection];

  const blocked = session.runBlockedReason();
  const running = runStatus === 'running';
  // After edits: "Run from here" at the earliest node the last run no longer stands for.
  const ranFlow = useSessionState((state) => (state.viewing ? null : state.ranFlow));
  const earliest = earliestStale(flow, staleNodes(ranFlow, flow));
  const earliestNode = earliest ? flow.nodes.find((node) => node.id === earliest) : undefined;
  const partialBlocked = session.partialRunBlockedReason();
  const start = flow.nodes.find((node) => node.type === 'start');
  const initial = getPath(start?.data, 'initialInput');
  const placeholder =
    initial === undefined || initial === null || initial === ''
      ? 'Input (empty: the start node has none)'
      : typeof initial === 'string'
        ? initial
        : JSON.stringify(initial);

  return (
    <header className="toolbar">
      <div className="toolbar-group">
        <span className="brand">Weft</span>
        <button type="button" className="button" data-testid="file-new" onClick={props.onNew} title="New flow (Ctrl+N)">
          New
        </button>
        <button type="button" className="button" data-testid="file-open" onClick={props.onOpen} title="Open (Ctrl+O)">
          Open…
        </button>
        <button type="button" className="button" data-testid="file-save" onClick={props.onSave} title="Save (Ctrl+S)">
          Save
        </button>
        <button type="button" className="button" data-testid="file-save-as" onClick={props.onSaveAs} title="Save as (Ctrl+Shift+S)">
          Save as…
        </button>
        <span className="toolbar-separator" />
        <button type="button" className="icon-button" data-testid="undo" disabled={!canUndo || viewing} onClick={() => session.canvas.undo()} title="Undo (Ctrl+Z)">
          ↶
        </button>
        <button type="button" className="icon-button" data-testid="redo" disabled={!canRedo || viewing} onClick={() => session.canvas.redo()} title="Redo (Ctrl+Shift+Z)">
          ↷
        </button>
        <button type="button" className="icon-button" data-testid="fit-view" onClick={props.onFitView} title="Fit view (F)">
          <FitIcon />
        </button>
        <span className="toolbar-separator" />
        <button
          type="button"
          className="button"
          data-testid="tidy-up"
          disabled={viewing}
          onClick={props.onTidy}
          title={`Tidy up: lay the flow out in layers, ${across} (Shift+T; Ctrl+Z undoes it)`}
        >
          Tidy up
        </button>
        <select
          className="input small tidy-direction"
          data-testid="tidy-direction"
          aria-label="Direction Tidy up lays the flow out in"
          title="Which way Tidy up lays the flow out"
          value={tidyDirection}
          onChange={(event) => session.layout.set({ tidyDirection: event.target.value as TidyArrangement })}
        >
          <option value="right">→ Left to right</option>
          <option value="down">↓ Top down</option>
          <option value="rows">↵ In rows</option>
        </select>
      </div>
      <div className="title" data-testid="title" data-dirty={dirty ? 'true' : 'false'} title={path ?? 'Not saved yet'}>
        {origin && (
          <span
            className="server-badge"
            data-testid="title-server"
            title={`The flow ${origin.name} of server ${origin.server} (version ${origin.version.slice(0, SHORT_HASH)}): Run runs the server's file there, with the breakpoints and pins set here (Save as… makes it a file of this machine)`}
          >
            {origin.server}
          </span>
        )}
        <span className="title-file">{origin ? `${origin.name}.json` : fileNameOf(path)}</span>
        {dirty && (
          <span className="dirty-marker" aria-label="unsaved changes">
            {' •'}
          </span>
        )}
        {flow.name && <span className="title-name muted"> — {flow.name}</span>}
      </div>
      <div className="toolbar-group run-group">
        <input
          className="input run-input"
          data-testid="run-input"
          aria-label="The run's input"
          value={props.input}
          placeholder={placeholder}
          title="The run's input; empty uses the start node's initial input"
          onChange={(event) => props.onInput(event.target.value)}
          onKeyDown={(event) => {
            if (event.key === 'Enter' && !event.shiftKey) {
              event.preventDefault();
              props.onRun();
            }
          }}
        />
        <button
          type="button"
          className="button primary"
          data-testid="run"
          disabled={blocked !== null}
          onClick={props.onRun}
          title={blocked ?? (origin ? `Run ${origin.name} on server ${origin.server} (Ctrl+Enter)` : 'Run the flow (Ctrl+Enter)')}
        >
          ▶ Run
        </button>
        {earliestNode && !running && (
          <button
            type="button"
            className="button"
            data-testid="run-from-stale"
            data-node-id={earliestNode.id}
            disabled={partialBlocked !== null}
            title={partialBlocked ?? 'Run from the first node edited since the last run, reusing what it left before it'}
            onClick={() => void session.startRun('', { nodeId: earliestNode.id, only: false })}
          >
            ▶ Run from {labelOf(earliestNode)}
          </button>
        )}
        {running && (
          <button
            type="button"
            className="button"
            data-testid="pause"
            title="Start no new step: the run stops before its next one, as at a breakpoint"
            onClick={() => void session.pauseRun()}
          >
            ❚❚ Pause
          </button>
        )}
        {running && (
          <button type="button" className="button danger" data-testid="cancel" onClick={() => void session.cancelRun()}>
            ■ Cancel
          </button>
        )}
        {budget && runId && (
          <span
            className={`run-spent${over ? ' over' : ''}`}
            data-testid="run-spent"
            title="What the run shown spent of the flow's budget (settings.budget)"
          >
            {spentText(spent, budget)}
          </span>
        )}
        <span
          className={`run-status status-${runStatus ?? 'none'}`}
          data-testid="run-status"
          data-run-id={runId ?? undefined}
          title={runError ?? undefined}
        >
          {runStatus ?? ''}
        </span>
        <button type="button" className="icon-button" data-testid="help-button" onClick={props.onHelp} title="Keyboard shortcuts (?)">
          ?
        </button>
      </div>
      {blocked !== null && !running && (
        <div className="run-blocked" data-testid="run-blocked-reason" title={blocked}>
          {blocked}
        </div>
      )}
    </header>
  );
}
