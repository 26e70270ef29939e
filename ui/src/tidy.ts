// "Tidy up": a layered layout of a flow, so that a run reads in one direction. Nodes go in
// layers by their longest path from where the run starts (loops are cut where a depth-first
// walk meets them again, so they cannot stretch the flow without end); a subagent sits under
// the agent that calls it, not in a layer of its own; the order within each layer is swept a
// few times towards the middle of each node's neighbours, which undoes most crossings; and a
// node nothing is wired to goes after the rest instead of widening the first layer.
// Pure and deterministic: the same flow and sizes give the same positions.

import { isSubagentEdge, sourceHandleOf, type CanvasFlow, type FlowNode } from './flowMapping';

export type TidyDirection = 'right' | 'down';
/** What the app offers: a direction, or to the right in rows as wide as the view. */
export type TidyArrangement = TidyDirection | 'rows';

export interface TidyNode {
  id: string;
  /** Where it is now: the tidied flow keeps its top left corner where the flow's was. */
  position?: { x: number; y: number };
  /** The drawn size when known (xyflow's measured size), else a default. */
  width?: number;
  height?: number;
}

export interface TidyEdge {
  source: string;
  target: string;
  /** The target is a tool of the source agent: placed with it, not after it. */
  subagent?: boolean;
  /** The source handle's place among its node's handles, top first: keeps the targets of an
   *  `if` or an approval in the order of their handles. */
  port?: number;
}

export interface TidyOptions {
  direction: TidyDirection;
  /** The size of a node whose size is not known. */
  defaultSize?: { width: number; height: number };
  /** Room between layers: for the edges and their arrows. */
  layerGap?: number;
  /** Room between neighbours in one layer. */
  nodeGap?: number;
  /** How long the layers may reach (in the direction laid out) before they wrap. */
  wrap?: number;
}

export interface Point {
  x: number;
  y: number;
}

export const TIDY_DEFAULTS = {
  defaultSize: { width: 200, height: 100 },
  layerGap: 48,
  nodeGap: 32,
};

/** Room between an agent and the subagents under it. */
const CHILD_GAP = 28;
/** Passes of ordering (down and up alternately) and of placing. */
const ORDER_PASSES = 6;

interface Size {
  width: number;
  height: number;
}

/** A node with the subagents placed with it: laid out as one box. */
interface Block {
  id: string;
  size: Size;
  /** Where each node of the block goes, from the block's top left corner. */
  offsets: Map<string, Point>;
}

/** A node of the layered graph: a block, or a bend point of an edge longer than one layer. */
interface Vertex {
  block: Block | null;
  layer: number;
  /** Along the layer (y when laid out to the right, x when down). */
  cross: number;
  crossSize: number;
  mainSize: number;
  /** Where, along the layer, the block's own node starts: neighbours line up on it. */
  anchor: number;
  preds: { vertex: number; port: number }[];
  succs: { vertex: number; port: number }[];
}

/** New top left corners for `nodes`, by id. */
export function tidyLayout(nodes: readonly TidyNode[], edges: readonly TidyEdge[], options: TidyOptions): Map<string, Point> {
  const down = options.direction === 'down';
  const fallback = options.defaultSize ?? TIDY_DEFAULTS.defaultSize;
  const layerGap = options.layerGap ?? TIDY_DEFAULTS.layerGap;
  const nodeGap = options.nodeGap ?? TIDY_DEFAULTS.nodeGap;
  const result = new Map<string, Point>();
  if (nodes.length === 0) return result;

  const index = new Map<string, number>();
  nodes.forEach((node, i) => {
    if (!index.has(node.id)) index.set(node.id, i);
  });
  const sizeOf = (i: number): Size => ({
    width: positive(nodes[i].width) ?? fallback.width,
    height: positive(nodes[i].height) ?? fallback.height,
  });
  const wired = edges.filter((edge) => index.has(edge.source) && index.has(edge.target) && edge.source !== edge.target);
  const execution = wired.filter((edge) => !edge.subagent);

  // --- subagents: a tool agent that takes no part in the run's order goes with its caller.
  const inRun = new Set<string>();
  for (const edge of execution) {
    inRun.add(edge.source);
    inRun.add(edge.target);
  }
  const parentOf = new Map<string, string>();
  const childrenOf = new Map<string, string[]>();
  for (const edge of wired) {
    if (!edge.subagent || inRun.has(edge.target) || parentOf.has(edge.target)) continue;
    // Agents calling each other in a circle: the one that would close it stays on its own.
    let ancestor: string | undefined = edge.source;
    while (ancestor !== undefined && ancestor !== edge.target) ancestor = parentOf.get(ancestor);
    if (ancestor === edge.target) continue;
    parentOf.set(edge.target, edge.source);
    listIn(childrenOf, edge.source).push(edge.target);
  }
  const blockOf = (id: string): Block => {
    const own = sizeOf(index.get(id)!);
    const children = (childrenOf.get(id) ?? []).map(blockOf);
    const offsets = new Map<string, Point>([[id, { x: 0, y: 0 }]]);
    if (children.length === 0) return { id, size: own, offsets };
    const place = (child: Block, at: Point) => {
      for (const [member, offset] of child.offsets) offsets.set(member, { x: at.x + offset.x, y: at.y + offset.y });
    };
    if (!down) {
      // Stacked under the agent, indented past its subagent handle (the middle of its bottom
      // edge): the layers to the right keep their width.
      const indent = Math.round(own.width / 2) + CHILD_GAP;
      let y = own.height + CHILD_GAP;
      let width = own.width;
      for (const child of children) {
        place(child, { x: indent, y });
        y += child.size.height + CHILD_GAP;
        width = Math.max(width, indent + child.size.width);
      }
      return { id, size: { width, height: y - CHILD_GAP }, offsets };
    }
    // In a row under the agent, which sits over the middle of the row.
    const row = children.reduce((sum, child) => sum + child.size.width, 0) + CHILD_GAP * (children.length - 1);
    const width = Math.max(own.width, row);
    offsets.set(id, { x: Math.round((width - own.width) / 2), y: 0 });
    let x = Math.round((width - row) / 2);
    let height = own.height;
    for (const child of children) {
      place(child, { x, y: own.height + CHILD_GAP });
      x += child.size.width + CHILD_GAP;
      height = Math.max(height, own.height + CHILD_GAP + child.size.height);
    }
    return { id, size: { width, height }, offsets };
  };

  const members = nodes.map((node) => node.id).filter((id, i) => index.get(id) === i && !parentOf.has(id));
  const blocks = new Map(members.map((id) => [id, blockOf(id)]));
  const running = members.filter((id) => inRun.has(id));
  const loose = members.filter((id) => !inRun.has(id));

  // --- loops: a depth-first walk from the starts; an edge back into the walk's own path is
  // a loop's way back, and is left out of the layering.
  const outgoing = new Map<string, { target: string; port: number; order: number }[]>();
  const incoming = new Map<string, number>();
  execution.forEach((edge, order) => {
    listIn(outgoing, edge.source).push({ target: edge.target, port: edge.port ?? 0, order });
    incoming.set(edge.target, (incoming.get(edge.target) ?? 0) + 1);
  });
  for (const list of outgoing.values()) list.sort((a, b) => a.port - b.port || a.order - b.order);
  const discovered = new Map<string, number>();
  const onPath = new Set<string>();
  const forward: { source: string; target: string; port: number }[] = [];
  const walk = (root: string) => {
    if (discovered.has(root)) return;
    const stack: { id: string; next: number }[] = [{ id: root, next: 0 }];
    discovered.set(root, discovered.size);
    onPath.add(root);
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      const out = outgoing.get(top.id) ?? [];
      if (top.next >= out.length) {
        onPath.delete(top.id);
        stack.pop();
        continue;
      }
      const { target, port } = out[top.next++];
      if (onPath.has(target)) continue;
      forward.push({ source: top.id, target, port });
      if (discovered.has(target)) continue;
      discovered.set(target, discovered.size);
      onPath.add(target);
      stack.push({ id: target, next: 0 });
    }
  };
  for (const id of running) if (!incoming.has(id)) walk(id);
  // What only a loop leads to (no node without inputs reaches it).
  for (const id of running) walk(id);

  // --- layers: the longest path from a start, over the edges that go forward.
  const layerOf = new Map<string, number>();
  const remaining = new Map(running.map((id) => [id, 0]));
  const forwardOut = new Map<string, { target: string; port: number }[]>();
  for (const edge of forward) {
    remaining.set(edge.target, (remaining.get(edge.target) ?? 0) + 1);
    listIn(forwardOut, edge.source).push(edge);
  }
  const ready = running.filter((id) => remaining.get(id) === 0);
  for (const id of ready) layerOf.set(id, 0);
  for (let at = 0; at < ready.length; at++) {
    const id = ready[at];
    for (const { target } of forwardOut.get(id) ?? []) {
      layerOf.set(target, Math.max(layerOf.get(target) ?? 0, layerOf.get(id)! + 1));
      const left = remaining.get(target)! - 1;
      remaining.set(target, left);
      if (left === 0) ready.push(target);
    }
  }
  // A second start (one feeding a join further on) goes just before what it feeds, not at
  // the far left with a long edge.
  const fed = new Set(forward.map((edge) => edge.target));
  for (const id of running) {
    const out = forwardOut.get(id);
    if (!out || fed.has(id)) continue;
    const nearest = Math.min(...out.map((edge) => layerOf.get(edge.target)!));
    layerOf.set(id, Math.max(layerOf.get(id)!, nearest - 1));
  }

  // --- the layered graph: blocks, and a bend point in each layer a long edge crosses.
  const vertices: Vertex[] = [];
  const vertexOf = new Map<string, number>();
  const mainOf = (size: Size) => (down ? size.height : size.width);
  const crossOf = (size: Size) => (down ? size.width : size.height);
  for (const id of running) {
    const block = blocks.get(id)!;
    const own = block.offsets.get(id)!;
    vertexOf.set(id, vertices.length);
    vertices.push({
      block,
      layer: layerOf.get(id)!,
      cross: 0,
      crossSize: crossOf(block.size),
      mainSize: mainOf(block.size),
      anchor: down ? own.x : own.y,
      preds: [],
      succs: [],
    });
  }
  for (const edge of forward) {
    let from = vertexOf.get(edge.source)!;
    const to = vertexOf.get(edge.target)!;
    let port = edge.port;
    for (let layer = vertices[from].layer + 1; layer < vertices[to].layer; layer++) {
      const bend = vertices.length;
      vertices.push({ block: null, layer, cross: 0, crossSize: 0, mainSize: 0, anchor: 0, preds: [], succs: [] });
      vertices[from].succs.push({ vertex: bend, port });
      vertices[bend].preds.push({ vertex: from, port });
      from = bend;
      port = 0;
    }
    vertices[from].succs.push({ vertex: to, port });
    vertices[to].preds.push({ vertex: from, port });
  }
  const depth = vertices.reduce((most, vertex) => Math.max(most, vertex.layer + 1), 0);
  let layers: number[][] = Array.from({ length: depth }, () => []);
  vertices.forEach((vertex, v) => layers[vertex.layer].push(v));
  // First in the order the walk met them, which keeps each branch together.
  const firstSeen = (v: number): number => {
    const block = vertices[v].block;
    if (block) return discovered.get(block.id) ?? 0;
    return firstSeen(vertices[v].preds[0].vertex) + 0.5;
  };
  const seen = vertices.map((_, v) => firstSeen(v));
  for (const layer of layers) layer.sort((a, b) => seen[a] - seen[b] || a - b);

  // --- order within layers: each vertex towards the mean place of its neighbours on the side
  // swept from; the order with the fewest crossings wins.
  const rankIn = (order: number[][]) => {
    const rank = new Array<number>(vertices.length);
    for (const layer of order) layer.forEach((v, i) => (rank[v] = i));
    return rank;
  };
  const crossings = (order: number[][]) => {
    const rank = rankIn(order);
    let count = 0;
    for (const layer of order) {
      const ends: [number, number][] = [];
      for (const v of layer) for (const succ of vertices[v].succs) ends.push([rank[v] + succ.port / 1000, rank[succ.vertex]]);
      for (let i = 0; i < ends.length; i++) {
        for (let j = i + 1; j < ends.length; j++) {
          if ((ends[i][0] - ends[j][0]) * (ends[i][1] - ends[j][1]) < 0) count++;
        }
      }
    }
    return count;
  };
  let best = layers.map((layer) => [...layer]);
  let fewest = crossings(best);
  for (let pass = 0; pass < ORDER_PASSES && fewest > 0; pass++) {
    const downward = pass % 2 === 0;
    const rank = rankIn(layers);
    const sequence = downward ? layers.keys() : [...layers.keys()].reverse();
    for (const at of sequence) {
      const weight = new Map<number, number>();
      for (const v of layers[at]) {
        const side = downward ? vertices[v].preds : vertices[v].succs;
        if (side.length === 0) {
          weight.set(v, rank[v]);
          continue;
        }
        // A handle further down the node pulls its target a little further down.
        const sum = side.reduce((total, link) => total + rank[link.vertex] + (downward ? link.port / 1000 : 0), 0);
        weight.set(v, sum / side.length);
      }
      layers[at].sort((a, b) => weight.get(a)! - weight.get(b)! || rank[a] - rank[b]);
      layers[at].forEach((v, i) => (rank[v] = i));
    }
    const count = crossings(layers);
    if (count < fewest) {
      fewest = count;
      best = layers.map((layer) => [...layer]);
    }
  }
  layers = best;

  // --- places along each layer: in order, apart by their sizes, each as near as the order
  // allows to its neighbours' line (their own node's top, or left).
  const separation = (a: Vertex, b: Vertex) => (a.block && b.block ? nodeGap : nodeGap / 2);
  const placeLayer = (layer: number[], wanted: number[]) => {
    // Offsets from the first vertex's start, then the best positions keeping those apart
    // (pool adjacent violators over the starts less their offsets).
    const offsets: number[] = [];
    let offset = 0;
    layer.forEach((v, i) => {
      if (i > 0) offset += vertices[layer[i - 1]].crossSize + separation(vertices[layer[i - 1]], vertices[v]);
      offsets.push(offset);
    });
    const pools: { sum: number; count: number }[] = [];
    layer.forEach((v, i) => {
      pools.push({ sum: wanted[i] - vertices[v].anchor - offsets[i], count: 1 });
      while (pools.length > 1 && mean(pools[pools.length - 2]) > mean(pools[pools.length - 1])) {
        const last = pools.pop()!;
        pools[pools.length - 1].sum += last.sum;
        pools[pools.length - 1].count += last.count;
      }
    });
    let i = 0;
    for (const pool of pools) {
      for (let k = 0; k < pool.count; k++, i++) vertices[layer[i]].cross = mean(pool) + offsets[i];
    }
  };
  const line = (v: number) => vertices[v].cross + vertices[v].anchor;
  for (const layer of layers) placeLayer(layer, layer.map(() => 0));
  const placeTowards = (at: number, downward: boolean) => {
    const layer = layers[at];
    const wanted = layer.map((v) => {
      const side = downward ? vertices[v].preds : vertices[v].succs;
      if (side.length === 0) return line(v);
      return side.reduce((total, link) => total + line(link.vertex), 0) / side.length;
    });
    placeLayer(layer, wanted);
  };
  for (let at = 1; at < depth; at++) placeTowards(at, true);
  for (let at = depth - 2; at >= 0; at--) placeTowards(at, false);
  for (let at = 1; at < depth; at++) placeTowards(at, true);

  // --- positions: layers one after the other, each as deep as its deepest block; with a
  // `wrap`, the layers that would reach past it start a new band beside the first (under it
  // when laid out to the right), as lines of text do.
  const deepest = layers.map((layer) => layer.reduce((most, v) => Math.max(most, vertices[v].mainSize), 0));
  const bandOf: number[] = [];
  const mainAt: number[] = [];
  let band = 0;
  let run = 0;
  deepest.forEach((length) => {
    if (options.wrap !== undefined && run > 0 && run + length > options.wrap) {
      band += 1;
      run = 0;
    }
    bandOf.push(band);
    mainAt.push(run);
    run += length + layerGap;
  });
  const extent = Array.from({ length: band + 1 }, () => ({ low: Infinity, high: -Infinity }));
  layers.forEach((layer, at) => {
    for (const v of layer) {
      extent[bandOf[at]].low = Math.min(extent[bandOf[at]].low, vertices[v].cross);
      extent[bandOf[at]].high = Math.max(extent[bandOf[at]].high, vertices[v].cross + vertices[v].crossSize);
    }
  });
  const shift: number[] = [];
  let next = 0;
  for (const { low, high } of extent) {
    shift.push(Number.isFinite(low) ? next - low : next);
    if (Number.isFinite(low)) next += high - low + layerGap;
  }
  const placed: { block: Block; at: Point }[] = [];
  layers.forEach((layer, at) => {
    for (const v of layer) {
      const vertex = vertices[v];
      const cross = vertex.cross + shift[bandOf[at]];
      if (vertex.block) placed.push({ block: vertex.block, at: down ? { x: cross, y: mainAt[at] } : { x: mainAt[at], y: cross } });
    }
  });
  // What nothing is wired to: after the rest (under it, or beside it when laid out downwards),
  // in rows no longer than the rest is long.
  if (loose.length > 0) {
    const bounds = boxOf(placed);
    const along = bounds ? (down ? bounds.height : bounds.width) : 0;
    const limit = Math.max(along, 3 * (down ? fallback.height : fallback.width) + 2 * nodeGap);
    const start = bounds ? (down ? { x: bounds.x + bounds.width + layerGap, y: bounds.y } : { x: bounds.x, y: bounds.y + bounds.height + layerGap }) : { x: 0, y: 0 };
    let run = 0;
    let row = 0;
    let rowDepth = 0;
    for (const id of loose) {
      const block = blocks.get(id)!;
      const length = down ? block.size.height : block.size.width;
      const depthOf = down ? block.size.width : block.size.height;
      if (run > 0 && run + length > limit) {
        row += rowDepth + nodeGap;
        run = 0;
        rowDepth = 0;
      }
      placed.push({ block, at: down ? { x: start.x + row, y: start.y + run } : { x: start.x + run, y: start.y + row } });
      run += length + nodeGap;
      rowDepth = Math.max(rowDepth, depthOf);
    }
  }

  // Where the flow was: its top left corner stays, so the view does not jump away from it.
  const before = nodes.reduce<Point | null>((corner, node) => {
    if (!node.position) return corner;
    return corner ? { x: Math.min(corner.x, node.position.x), y: Math.min(corner.y, node.position.y) } : { ...node.position };
  }, null) ?? { x: 0, y: 0 };
  const after = boxOf(placed)!;
  for (const { block, at } of placed) {
    for (const [id, offset] of block.offsets) {
      result.set(id, {
        x: Math.round(before.x + at.x + offset.x - after.x),
        y: Math.round(before.y + at.y + offset.y - after.y),
      });
    }
  }
  return result;
}

/**
 * New positions for the nodes of `flow`: `sizes` are the drawn sizes where known, `handles`
 * a node's source handle ids as drawn, top first.
 */
export function tidyFlow(
  flow: CanvasFlow,
  direction: TidyDirection,
  sizes: ReadonlyMap<string, { width?: number; height?: number } | undefined>,
  handles: (node: FlowNode) => readonly string[],
  wrap?: number,
): Map<string, Point> {
  const portsOf = new Map(flow.nodes.map((node) => [node.id, handles(node)]));
  return tidyLayout(
    flow.nodes.map((node) => ({
      id: node.id,
      position: { x: node.position?.x ?? 0, y: node.position?.y ?? 0 },
      ...sizes.get(node.id),
    })),
    flow.edges.map((edge) => {
      const port = portsOf.get(edge.source)?.indexOf(sourceHandleOf(edge)) ?? -1;
      return { source: edge.source, target: edge.target, subagent: isSubagentEdge(edge), port: port < 0 ? 0 : port };
    }),
    { direction, wrap },
  );
}

function listIn<T>(lists: Map<string, T[]>, key: string): T[] {
  let list = lists.get(key);
  if (!list) lists.set(key, (list = []));
  return list;
}

function positive(value: number | undefined): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : undefined;
}

function mean(pool: { sum: number; count: number }): number {
  return pool.sum / pool.count;
}

function boxOf(placed: { block: Block; at: Point }[]): { x: number; y: number; width: number; height: number } | null {
  if (placed.length === 0) return null;
  let left = Infinity;
  let top = Infinity;
  let right = -Infinity;
  let bottom = -Infinity;
  for (const { block, at } of placed) {
    left = Math.min(left, at.x);
    top = Math.min(top, at.y);
    right = Math.max(right, at.x + block.size.width);
    bottom = Math.max(bottom, at.y + block.size.height);
  }
  return { x: left, y: top, width: right - left, height: bottom - top };
}
