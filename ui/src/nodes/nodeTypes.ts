// xyflow's node types: every kind of the catalog, and the fallback for kinds it does not
// know, drawn by the one generic component; and the ghosts of nodes a compared version had. Built once per catalog and kept at module
// scope, because xyflow re-mounts every node when the nodeTypes object changes.

import type { NodeTypes } from '@xyflow/react';
import type { KindCatalog } from '../bindings';
import { FALLBACK_NODE_TYPE } from '../flowMapping';
import { GHOST_NODE_TYPE } from '../flowCompare';
import { GenericNode } from './GenericNode';
import { GhostNode } from './GhostNode';

const FALLBACK_ONLY: NodeTypes = { [FALLBACK_NODE_TYPE]: GenericNode, [GHOST_NODE_TYPE]: GhostNode };
const byCatalog = new WeakMap<KindCatalog, NodeTypes>();

export function nodeTypesFor(catalog: KindCatalog | null): NodeTypes {
  if (!catalog) return FALLBACK_ONLY;
  let types = byCatalog.get(catalog);
  if (!types) {
    types = { ...FALLBACK_ONLY };
    for (const kind of catalog.kinds) types[kind.id] = GenericNode;
    byCatalog.set(catalog, types);
  }
  return types;
}
