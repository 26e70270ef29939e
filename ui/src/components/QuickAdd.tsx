// The menu that opens where a connection was dropped on empty canvas: type to filter the node
// kinds, pick one (click or Enter), and it is added there, wired from the handle the
// connection came from. Escape or a click elsewhere closes it.

import { useEffect, useRef, useState } from 'react';
import type { KindDescription } from '../catalog';
import { matchingKinds } from './Palette';

export interface QuickAddProps {
  kinds: readonly KindDescription[];
  /** Where the menu opens, in window pixels. */
  at: { x: number; y: number };
  onPick: (kind: KindDescription) => void;
  onClose: () => void;
}

export function QuickAdd({ kinds, at, onPick, onClose }: QuickAddProps) {
  const [query, setQuery] = useState('');
  const menu = useRef<HTMLDivElement>(null);
  // Only kinds that take an input can be wired to.
  const shown = matchingKinds(
    kinds.filter((kind) => kind.inputs),
    query,
  );

  useEffect(() => {
    const onPointerDown = (event: PointerEvent) => {
      if (menu.current && !menu.current.contains(event.target as Node)) onClose();
    };
    window.addEventListener('pointerdown', onPointerDown);
    return () => window.removeEventListener('pointerdown', onPointerDown);
  }, [onClose]);

  return (
    <div className="quick-add" data-testid="quick-add" ref={menu} style={{ left: at.x, top: at.y }}>
      <input
        autoFocus
        className="input"
        data-testid="quick-add-search"
        placeholder="Add a node here…"
        value={query}
        onChange={(event) => setQuery(event.target.value)}
        onKeyDown={(event) => {
          if (event.key === 'Enter' && shown[0]) onPick(shown[0]);
          else if (event.key === 'Escape') onClose();
        }}
      />
      <ul className="quick-add-list">
        {shown.map((kind) => (
          <li key={kind.id}>
            <button type="button" className={`palette-item kind-${kind.id}`} data-testid={`quick-add-${kind.id}`} onClick={() => onPick(kind)}>
              <span className="palette-swatch" />
              {kind.title}
            </button>
          </li>
        ))}
      </ul>
    </div>
  );
}
