// Every keyboard shortcut, listed from the same table the key handler dispatches from.

import { SHORTCUTS, displayCombo } from '../shortcuts';

export function HelpPanel({ onClose }: { onClose: () => void }) {
  return (
    <div className="modal-backdrop" onMouseDown={onClose}>
      <div
        className="modal help"
        role="dialog"
        aria-modal="true"
        aria-label="Keyboard shortcuts"
        data-testid="help"
        onMouseDown={(event) => event.stopPropagation()}
      >
        <h2 className="modal-title">Keyboard shortcuts</h2>
        <table className="shortcut-table">
          <tbody>
            {SHORTCUTS.map((shortcut) => (
              <tr key={shortcut.description} data-testid="shortcut">
                <td className="shortcut-keys">
                  {shortcut.keys.map((combo) => (
                    <kbd key={combo}>{displayCombo(combo)}</kbd>
                  ))}
                </td>
                <td>{shortcut.description}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <p className="muted">
          Shortcuts other than saving and running do not fire while you type in a field. Connect nodes by
          dragging from a handle on the right (or the purple subagent handle at the bottom of an agent) to a
          node's left handle.
        </p>
        <div className="modal-buttons">
          <button type="button" className="button" data-testid="help-close" onClick={onClose}>
            Close
          </button>
        </div>
      </div>
    </div>
  );
}
