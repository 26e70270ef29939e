// Asks for a flow file's path (Open, Save As): the system's file dialog (Browse…), a path to
// type, or one of the recent files. The typed path and the list stay for keyboards and tests,
// which cannot drive the system's dialog.

import { useEffect, useRef, useState } from 'react';
import { useSession } from '../hooks';

export interface PathDialogProps {
  /** Which system dialog Browse… opens. */
  mode: 'open' | 'save';
  title: string;
  confirmLabel: string;
  initialPath: string;
  onConfirm: (path: string) => void;
  onCancel: () => void;
}

export function PathDialog({ mode, title, confirmLabel, initialPath, onConfirm, onCancel }: PathDialogProps) {
  const session = useSession();
  const [path, setPath] = useState(initialPath);
  const [recent, setRecent] = useState<string[] | null>(null);
  const input = useRef<HTMLInputElement>(null);

  useEffect(() => {
    input.current?.focus();
    input.current?.select();
    let live = true;
    void session.recentFiles().then((files) => live && setRecent(files));
    return () => {
      live = false;
    };
  }, [session]);

  const confirm = (chosen: string) => {
    if (chosen.trim() !== '') onConfirm(chosen.trim());
  };

  return (
    <div className="modal-backdrop" onMouseDown={onCancel}>
      <form
        className="modal path-dialog"
        role="dialog"
        aria-modal="true"
        aria-label={title}
        data-testid="path-dialog"
        onMouseDown={(event) => event.stopPropagation()}
        onSubmit={(event) => {
          event.preventDefault();
          confirm(path);
        }}
      >
        <h2 className="modal-title">{title}</h2>
        <label className="field-label" htmlFor="path-input">
          Path of the flow file (.json)
        </label>
        <div className="path-row">
          <input
            id="path-input"
            ref={input}
            className="input mono"
            data-testid="path-input"
            value={path}
            placeholder="/home/me/flows/triage.json"
            spellCheck={false}
            onChange={(event) => setPath(event.target.value)}
          />
          <button
            type="button"
            className="button"
            data-testid="path-browse"
            title="Choose the file with the system's file dialog"
            onClick={() =>
              void session.pickFile(mode, path).then((chosen) => {
                // Chosen in the system's dialog: that is the answer.
                if (chosen) confirm(chosen);
              })
            }
          >
            Browse…
          </button>
        </div>
        <h3 className="section-title">Recent files</h3>
        <ul className="recent-list">
          {recent === null && <li className="muted">Loading…</li>}
          {recent?.length === 0 && <li className="muted">None yet.</li>}
          {recent?.map((file) => (
            <li key={file}>
              <button
                type="button"
                className="recent-file mono"
                data-testid="recent-file"
                title="Click to choose, double-click to confirm"
                onClick={() => setPath(file)}
                onDoubleClick={() => confirm(file)}
              >
                {file}
              </button>
            </li>
          ))}
        </ul>
        <div className="modal-buttons">
          <button type="button" className="button" data-testid="path-cancel" onClick={onCancel}>
            Cancel
          </button>
          <button type="submit" className="button primary" data-testid="path-confirm" disabled={path.trim() === ''}>
            {confirmLabel}
          </button>
        </div>
      </form>
    </div>
  );
}
