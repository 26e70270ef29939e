// A handle between two panels that resizes one of them by dragging (pointer events, so
// WebDriver can drive it too). `size` is the panel's size when the drag starts; `sign` says
// whether moving right/down makes it bigger (+1) or smaller (-1).

import { useRef, type PointerEvent as ReactPointerEvent } from 'react';

interface SplitterProps {
  testId: string;
  /** `columns` splits side by side (drag left/right), `rows` one above the other. */
  direction: 'columns' | 'rows';
  size: number;
  sign: 1 | -1;
  onResize: (size: number) => void;
  label: string;
}

export function Splitter({ testId, direction, size, sign, onResize, label }: SplitterProps) {
  const start = useRef<{ at: number; size: number } | null>(null);
  const position = (event: PointerEvent | ReactPointerEvent) => (direction === 'columns' ? event.clientX : event.clientY);

  const onPointerDown = (event: ReactPointerEvent) => {
    if (event.button !== 0) return;
    event.preventDefault();
    start.current = { at: position(event), size };
    const onMove = (move: PointerEvent) => {
      if (!start.current) return;
      onResize(start.current.size + sign * (position(move) - start.current.at));
    };
    const onUp = () => {
      start.current = null;
      window.removeEventListener('pointermove', onMove);
      window.removeEventListener('pointerup', onUp);
    };
    window.addEventListener('pointermove', onMove);
    window.addEventListener('pointerup', onUp);
  };

  return (
    <div
      className={`splitter splitter-${direction}`}
      data-testid={testId}
      role="separator"
      aria-orientation={direction === 'columns' ? 'vertical' : 'horizontal'}
      aria-label={label}
      title={label}
      onPointerDown={onPointerDown}
    />
  );
}
