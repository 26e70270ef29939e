// A node the open flow no longer has, drawn where it was in the version the flow is compared
// with (History → Versions): faded, with nothing to click, so the person sees what went.

import { memo } from 'react';
import type { NodeProps } from '@xyflow/react';
import { kindOf, labelOf } from '../catalog';
import type { CanvasNode } from '../flowMapping';
import { useSessionState } from '../hooks';

function GhostNodeView({ data }: NodeProps<CanvasNode>) {
  const node = data.node;
  const kind = useSessionState((state) => kindOf(state.catalog, node.type));
  return (
    <div className={`weft-node kind-${node.type} compare-removed`} data-testid={`ghost-${node.id}`} title="Removed since the version compared with">
      <div className="node-header">
        <span className="node-label">{labelOf(node)}</span>
        <span className="compare-badge compare-removed">removed</span>
      </div>
      <div className="node-kind">
        {kind?.title ?? node.type}
        <span className="node-id">{node.id}</span>
      </div>
    </div>
  );
}

export const GhostNode = memo(GhostNodeView);
