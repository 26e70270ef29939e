// A yes/no question inside the app (native dialogs cannot be driven by tests and look out
// of place in the window).

import { useEffect, useRef, type ReactNode } from 'react';

export interface ConfirmDialogProps {
  testId: string;
  title: string;
  children: ReactNode;
  confirmLabel: string;
  confirmTestId: string;
  cancelTestId: string;
  onConfirm: () => void;
  onCancel: () => void;
}

export function ConfirmDialog(props: ConfirmDialogProps) {
  const cancel = useRef<HTMLButtonElement>(null);
  useEffect(() => cancel.current?.focus(), []);
  return (
    <div className="modal-backdrop" onMouseDown={props.onCancel}>
      <div
        className="modal"
        role="alertdialog"
        aria-modal="true"
        aria-label={props.title}
        data-testid={props.testId}
        onMouseDown={(event) => event.stopPropagation()}
      >
        <h2 className="modal-title">{props.title}</h2>
        <div className="modal-body">{props.children}</div>
        <div className="modal-buttons">
          <button ref={cancel} type="button" className="button" data-testid={props.cancelTestId} onClick={props.onCancel}>
            Cancel
          </button>
          <button type="button" className="button danger" data-testid={props.confirmTestId} onClick={props.onConfirm}>
            {props.confirmLabel}
          </button>
        </div>
      </div>
    </div>
  );
}
