// History → Versions: the open file's versions kept in the run store (each content it was run
// or saved in), and "Compare with…" any version, a run's flow or another file. A comparison
// marks the canvas (added and changed nodes, removed ones as ghosts, the changed fields in the
// inspector) under a banner that restores the compared version or closes it.

import { useEffect, useState } from 'react';
import { SHORT_HASH, type FileVersion } from '../bindings';
import { changeCounts } from '../flowCompare';
import { useCanvas, useSession, useSessionState } from '../hooks';
import { ConfirmDialog } from './ConfirmDialog';

function whenText(at: string): string {
  const date = new Date(at);
  return Number.isNaN(date.getTime()) ? at : date.toLocaleString();
}

/** "2 runs · saved by ana" */
function usesText(version: FileVersion): string {
  const parts: string[] = [];
  const runs = version.runs.length;
  if (runs > 0) parts.push(runs === 1 ? '1 run' : `${runs} runs`);
  const nested = version.subflowRuns.length;
  if (nested > 0) parts.push(`${nested === 1 ? '1 run' : `${nested} runs`} as a subflow`);
  const save = version.saves.at(-1);
  if (save) parts.push(`${save.kind === 'restore' ? 'restored' : 'saved'}${save.by ? ` by ${save.by}` : ''}`);
  return parts.join(' · ');
}

export function VersionsPanel() {
  const session = useSession();
  const path = useCanvas((state) => state.path);
  const versions = useSessionState((state) => state.versions);
  const compared = useSessionState((state) => state.flowCompare);
  const [against, setAgainst] = useState('');

  // Read again each time the list opens, and when another file is opened.
  useEffect(() => {
    void session.refreshVersions();
  }, [session, path]);

  const compareWith = async () => {
    if (await session.compareFlowWith(against.trim())) setAgainst('');
  };

  return (
    <div className="versions" data-testid="versions">
      <form
        className="versions-compare"
        onSubmit={(event) => {
          event.preventDefault();
          void compareWith();
        }}
      >
        <input
          className="input"
          data-testid="compare-with-input"
          placeholder="A version's hash, a run's id, or a flow file"
          aria-label="Compare the open flow with"
          value={against}
          onChange={(event) => setAgainst(event.target.value)}
        />
        <button type="submit" className="button small" data-testid="compare-with" disabled={against.trim() === ''}>
          Compare with…
        </button>
      </form>
      {!path && <p className="muted">Save the flow: its versions are kept as it is saved and run.</p>}
      {path && versions && versions.versions.length === 0 && (
        <p className="muted">No versions kept yet: each save and each run of this file keeps one.</p>
      )}
      <ul className="history-list">
        {versions?.versions.map((version) => (
          <li key={version.hash} className="history-item">
            <div
              className={`version-row ${compared?.against === version.hash ? 'current' : ''}`}
              data-testid="version-row"
              data-hash={version.hash}
              data-current={version.current ? 'true' : 'false'}
            >
              <code className="mono">{version.hash.slice(0, SHORT_HASH)}</code>
              {version.current && (
                <span className="run-status-chip status-completed" title="What the file holds now">
                  file now
                </span>
              )}
              <span className="history-meta muted">
                {whenText(version.lastAt)}
                {usesText(version) && ` · ${usesText(version)}`}
              </span>
              <button
                type="button"
                className="button small"
                data-testid="version-compare"
                title="Mark on the canvas what the open flow changed since this version"
                onClick={() => void session.compareFlowWith(version.hash)}
              >
                Compare
              </button>
            </div>
          </li>
        ))}
      </ul>
    </div>
  );
}

/** Over the canvas while the open flow is compared with another version. */
export function FlowCompareBanner() {
  const session = useSession();
  const compared = useSessionState((state) => state.flowCompare);
  const viewing = useSessionState((state) => state.viewing !== null);
  const [asking, setAsking] = useState(false);
  if (!compared || viewing) return null;
  return (
    <div className="banner comparing" data-testid="flow-compare-banner">
      <span className="banner-text">
        Compared with {compared.label}: <span data-testid="flow-compare-counts">{changeCounts(compared.diff)}</span>
      </span>
      <button type="button" className="button small" data-testid="flow-compare-restore" onClick={() => setAsking(true)}>
        Restore
      </button>
      <button type="button" className="button small" data-testid="flow-compare-close" onClick={() => session.closeFlowCompare()}>
        Close
      </button>
      {asking && (
        <ConfirmDialog
          testId="confirm-restore"
          title="Restore this version?"
          confirmLabel="Restore"
          confirmTestId="restore-confirm"
          cancelTestId="restore-cancel"
          onConfirm={() => {
            setAsking(false);
            session.restoreCompared();
          }}
          onCancel={() => setAsking(false)}
        >
          The canvas then holds {compared.label} in place of the open flow. Undo takes it back;
          the file changes when you save.
        </ConfirmDialog>
      )}
    </div>
  );
}
