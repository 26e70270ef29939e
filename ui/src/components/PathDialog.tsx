// Asks for a flow file's path (Open, Save As), with the recent files to pick from. An
// in-app dialog rather than the system's file picker, so that it can be driven by tests and
// needs no extra Tauri plugin.

import { useEffect, useRef, useState } from 'react';
import { useSession } from '../hooks';

export interface PathDialogProps {
  title: string;
  confirmLabel: string;
  initialPath: string;
  onConfirm: (path: string) => void;
  onCancel: () => void;
}

export function PathDialog({ title, confirmLabel, initialPath, onConfirm, onCancel }: PathDialogProps) {
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
