// Past runs from the store (runs of `weft` in the same store too). Opening one shows its
// flow, replayed statuses, log and outputs on the canvas; the edited flow stays as it was.

import { useEffect } from 'react';
import { useRun, useSession, useSessionState } from '../hooks';

function durationOf(startedAt: string, endedAt: string | null | undefined): string {
  if (!endedAt) return '—';
  const ms = new Date(endedAt).getTime() - new Date(startedAt).getTime();
  if (!Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

function startOf(startedAt: string): string {
  const date = new Date(startedAt);
  return Number.isNaN(date.getTime()) ? startedAt : date.toLocaleString();
}

export function HistoryPanel() {
  const session = useSession();
  const history = useSessionState((state) => state.history);
  // Subscribed so that the blocked reason below is recomputed when these change.
  useSessionState((state) => state.busy);
  useRun((view) => view.status);
  const viewingId = useSessionState((state) => state.viewing?.summary.id ?? null);
  const shownRunId = useRun((view) => view.runId);
  const blocked = session.openRunBlockedReason();

  // The list is read again each time the tab opens (runs of `weft` appear too).
  useEffect(() => {
    void session.refreshHistory();
  }, [session]);

  return (
    <div className="history" data-testid="history">
      <div className="history-toolbar">
        <button type="button" className="button small" data-testid="history-refresh" onClick={() => void session.refreshHistory()}>
          Refresh
        </button>
        {blocked && <span className="muted">{blocked}</span>}
      </div>
      {history.length === 0 && <p className="muted">No runs yet.</p>}
      <ul className="history-list">
        {history.map((run) => (
          <li key={run.id}>
            <button
              type="button"
              className={`history-row status-${run.status} ${run.id === viewingId || run.id === shownRunId ? 'current' : ''}`}
              data-testid="history-row"
              data-run-id={run.id}
              data-status={run.status}
              disabled={blocked !== null}
              onClick={() => void session.openRun(run.id)}
              title={run.flowPath ?? undefined}
            >
              <span className="history-name">{run.flowName || 'Untitled'}</span>
              <span className={`run-status-chip status-${run.status}`}>{run.status}</span>
              <span className="history-meta muted">
                {startOf(run.startedAt)} · {durationOf(run.startedAt, run.endedAt)}
                {run.waitingNodeId ? ` · waits at ${run.waitingNodeId}` : ''}
              </span>
              <span className="history-id muted mono">{run.id.slice(0, 8)}</span>
            </button>
          </li>
        ))}
      </ul>
    </div>
  );
}
