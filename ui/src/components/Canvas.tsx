// The xyflow canvas. It draws the flow on show (the edited one, or a past run's read-only)
// and turns xyflow's changes into store actions; it keeps no copy of the flow itself, only
// the node sizes xyflow measures.

import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'react';
import {
  Background,
  ControlButton,
  Controls,
  MiniMap,
  ReactFlow,
  getNodesBounds,
  useReactFlow,
  useStoreApi,
  type Connection,
  type EdgeChange,
  type FinalConnectionState,
  type NodeChange,
  type Viewport,
} from '@xyflow/react';
import { defaultData, handlesOf, kindOf, type KindDescription } from '../catalog';
import {
  FIT_MARGIN,
  READABLE_FIT_ZOOM,
  boundsOf,
  overlaps,
  readableViewport,
  viewportBeforeMeasuring,
  zoomStep,
  type Rect,
} from '../viewport';
import { tidyFlow, type TidyArrangement } from '../tidy';
import { QuickAdd } from './QuickAdd';
import { toCanvasEdges, toCanvasNodes, type CanvasEdge, type CanvasNode, type FlowNode } from '../flowMapping';
import { useCanvas, useLayout, useRun, useSession, useSessionState } from '../hooks';
import { nodeTypesFor } from '../nodes/nodeTypes';
import { promptNodeOf } from '../runStore';
import { GHOST_NODE_TYPE, GHOST_PREFIX } from '../flowCompare';
import { FitIcon } from './FitIcon';

const NO_IDS: ReadonlySet<string> = new Set();
/** The minimap's size, in pixels: a glance at where the view is, not a second canvas. */
const MINIMAP = { width: 150, height: 100, margin: 15 };
/** Below this size the canvas has no room to spare for the minimap: it would cover the nodes
 *  (with the log raised, or the side panel widened), so it is left out until there is room. */
const MINIMAP_ROOM = { width: 4 * MINIMAP.width, height: 4 * MINIMAP.height };
/** Where a new flow's start node sits on the canvas, in pixels from its top left corner. */
const NEW_FLOW_MARGIN = { x: 80, y: 140 };

/** Where the view of a new flow (just its start node, at `position`) sits: the start at the
 *  left at natural size, with room on the right to build the flow. */
function newFlowViewport(position: { x?: number | null; y?: number | null } | undefined): Viewport {
  return { x: NEW_FLOW_MARGIN.x - (position?.x ?? 0), y: NEW_FLOW_MARGIN.y - (position?.y ?? 0), zoom: 1 };
}

/** The zoom at which a node's text is its natural size: a prompt is shown at least so large. */
const READABLE_ZOOM = 1;
/** How often, and how far apart, a flow just shown is fitted again until its nodes are measured. */
const FIT_TRIES = 20;
const FIT_RETRY_MS = 50;
/** Room above a node that needs the person when it is too tall to be centred, in pixels. */
const PROMPT_MARGIN = 16;

/** Fits the flow shown so that its text stays readable: whole when it can be, else panned. */
export function useFitReadable(): (bounds?: Rect) => void {
  const { getNodes, setViewport } = useReactFlow();
  return useCallback(
    (bounds?: Rect) => {
      const nodes = getNodes();
      const pane = document.querySelector<HTMLElement>('[data-testid="canvas"]')?.getBoundingClientRect();
      if (nodes.length === 0 || !pane) return;
      void setViewport(readableViewport(bounds ?? getNodesBounds(nodes), { width: pane.width, height: pane.height }));
    },
    [getNodes, setViewport],
  );
}

/** Lays the edited flow out in layers (one undoable step) and fits the result into view. */
export function useTidyUp(): (arrangement: TidyArrangement) => void {
  const session = useSession();
  const { getNodes } = useReactFlow();
  const fitReadable = useFitReadable();
  return useCallback(
    (arrangement: TidyArrangement) => {
      if (session.getSnapshot().viewing) return;
      // Rows as wide as the canvas shows at the least readable zoom: the whole flow then fits
      // in view readably when it can.
      const pane = document.querySelector<HTMLElement>('[data-testid="canvas"]')?.getBoundingClientRect();
      const wrap = arrangement === 'rows' && pane ? Math.max(1, pane.width - 2 * FIT_MARGIN) / READABLE_FIT_ZOOM : undefined;
      const direction = arrangement === 'down' ? 'down' : 'right';
      const catalog = session.getSnapshot().catalog;
      const sizes = new Map(getNodes().map((node) => [node.id, node.measured]));
      const flow = session.canvas.getSnapshot().flow;
      const handles = (node: FlowNode) => handlesOf(kindOf(catalog, node.type), node.data).map((handle) => handle.id);
      const positions = tidyFlow(flow, direction, sizes, handles, wrap);
      session.canvas.placeNodes(positions);
      // Fitted to where the nodes go: xyflow draws them there only after the next render.
      const boxes = [...positions].map(([id, at]) => ({ ...at, width: sizes.get(id)?.width ?? 0, height: sizes.get(id)?.height ?? 0 }));
      const bounds = boundsOf(boxes);
      if (bounds) fitReadable(bounds);
    },
    [session, getNodes, fitReadable],
  );
}


/** The nodes a compared version had and the open flow has not, where they were: not to be
 *  selected, moved or connected. */
function ghostNodes(removed: FlowNode[]): CanvasNode[] {
  return removed.map((node) => ({
    id: `${GHOST_PREFIX}${node.id}`,
    type: GHOST_NODE_TYPE,
    position: { x: node.position?.x ?? 0, y: node.position?.y ?? 0 },
    data: { node },
    selectable: false,
    draggable: false,
    connectable: false,
    focusable: false,
    className: 'ghost',
  }));
}

export function Canvas({ theme = 'light' }: { theme?: 'light' | 'dark' }) {
  const session = useSession();
  const catalog = useSessionState((state) => state.catalog);
  const viewing = useSessionState((state) => state.viewing);
  const viewSelection = useSessionState((state) => state.viewSelection);
  const problemEdges = useSessionState((state) => state.problemEdges);
  const editedFlow = useCanvas((state) => state.flow);
  const selection = useCanvas((state) => state.selection);
  const activeEdges = useRun((view) => view.activeEdges);
  const traversedEdges = useRun((view) => view.traversedEdges);
  const runStatus = useRun((view) => view.status);
  const nodeStatus = useRun((view) => view.nodeStatus);
  const promptNode = useRun((view) => (view.status === 'paused' ? promptNodeOf(view.waiting) : null));

  const loads = useCanvas((state) => state.loads);
  const showMinimap = useLayout((layout) => layout.minimap);
  const { setViewport, getViewport, setCenter, getZoom, getNode, getNodes, flowToScreenPosition, screenToFlowPosition } = useReactFlow();
  const fitReadable = useFitReadable();
  const [quickAdd, setQuickAdd] = useState<{ at: { x: number; y: number }; source: string; sourceHandle: string | null } | null>(null);
  const [minimapTop, setMinimapTop] = useState(false);
  const paneRef = useRef<HTMLDivElement>(null);
  // The zoom, as a CSS variable: a node's text grows as the view zooms out below its natural
  // size, so that it still reads at the least zoom a flow is fitted at (styles.css). Set on
  // the element rather than through React, which would draw the canvas again at every frame
  // of a zoom; and in steps, so that a zoom lays the nodes' text out again a few times, not
  // at every frame.
  const flowStore = useStoreApi<CanvasNode, CanvasEdge>();
  useEffect(() => {
    let shown = '';
    const show = (zoom: number) => {
      const step = String(zoomStep(zoom));
      if (step === shown) return;
      shown = step;
      paneRef.current?.style.setProperty('--canvas-zoom', step);
    };
    show(flowStore.getState().transform[2]);
    return flowStore.subscribe((state) => show(state.transform[2]));
  }, [flowStore]);
  const [roomy, setRoomy] = useState(true);
  // The pane's size as last laid out, read without laying the page out again.
  const paneSize = useRef<{ width: number; height: number } | null>(null);
  useEffect(() => {
    const element = paneRef.current;
    if (!element || typeof ResizeObserver === 'undefined') return;
    const observer = new ResizeObserver(() => {
      const { width, height } = element.getBoundingClientRect();
      paneSize.current = { width, height };
      setRoomy(width >= MINIMAP_ROOM.width && height >= MINIMAP_ROOM.height);
    });
    observer.observe(element);
    return () => observer.disconnect();
  }, []);

  const flow = viewing?.flow ?? editedFlow;
  // The view the canvas starts at: for a new flow, where the fit below would put it 60 ms
  // later, so that the first frame does not show the start node elsewhere and then move it.
  const [initialViewport] = useState(() => (flow.nodes.length <= 1 ? newFlowViewport(flow.nodes[0]?.position) : undefined));
  const readOnly = viewing !== null;
  const shownFlow = useRef(flow);
  shownFlow.current = flow;

  // A flow just opened (or a past run shown, or compared with a version, whose removed nodes
  // are drawn too) is fitted into view once its nodes are measured.
  const comparedWith = useSessionState((state) => state.flowCompare?.against ?? null);
  // A flow too big to show whole at a readable zoom is fitted at that zoom whatever its nodes'
  // sizes: the view goes there before the nodes are first laid out, so that their text is laid
  // out once, at the size that zoom gives it, rather than at the last flow's zoom and then
  // again for all of them when the fit below lands (for 1,000 nodes, most of a second).
  useLayoutEffect(() => {
    const size = paneSize.current;
    // Drawn where toCanvasNodes puts them (no position: the origin).
    const corners = shownFlow.current.nodes.map((node) => ({ x: node.position?.x ?? 0, y: node.position?.y ?? 0 }));
    const early = size ? viewportBeforeMeasuring(corners, size) : null;
    if (early) void setViewport(early);
  }, [loads, viewing, comparedWith, setViewport]);
  // A new flow (just its start node) is not blown up to fill the canvas: its start sits at
  // the left at natural size, with room on the right to build the flow.
  useEffect(() => {
    let tries = 0;
    let timer: ReturnType<typeof setTimeout>;
    const fit = () => {
      const { nodes } = shownFlow.current;
      if (nodes.length <= 1) {
        const target = newFlowViewport(nodes[0]?.position);
        const { x, y, zoom } = getViewport();
        // The window's first flow is drawn there from the start (defaultViewport below).
        if (x !== target.x || y !== target.y || zoom !== target.zoom) void setViewport(target);
        return;
      }
      // Fitted by the nodes' measured sizes: on a busy machine they may not be measured yet,
      // and a fit by unmeasured nodes leaves part of the flow out of view. Asked again until
      // they are (for a second at most).
      if (getNodes().some((node) => !node.measured?.width) && ++tries < FIT_TRIES) {
        timer = setTimeout(fit, FIT_RETRY_MS);
        return;
      }
      fitReadable();
    };
    timer = setTimeout(fit, 60);
    return () => clearTimeout(timer);
  }, [loads, viewing, comparedWith, fitReadable, setViewport, getViewport, getNodes]);

  // Sizes xyflow measured, by node id; kept here because the drawn nodes are re-derived
  // from the flow on every change and xyflow needs them on its nodes.
  const measured = useRef(new Map<string, { width: number; height: number }>());
  const [measureVersion, setMeasureVersion] = useState(0);

  const knownKinds = useMemo(() => new Set(catalog?.kinds.map((kind) => kind.id) ?? []), [catalog]);
  const selectedNodes = useMemo(
    () => (readOnly ? new Set(viewSelection ? [viewSelection] : []) : new Set(selection.nodes)),
    [readOnly, viewSelection, selection.nodes],
  );
  const selectedEdges = useMemo(() => (readOnly ? NO_IDS : new Set(selection.edges)), [readOnly, selection.edges]);

  // The node that needs the person (an approval, a breakpoint) is brought to the middle of the
  // view, zoomed in to at least its natural size, so its prompt is readable and not off screen
  // or under the minimap; once the prompt is drawn (and each time it grows) again, and a node
  // too tall for the view then shows from its top, where the question is. When nothing waits
  // any more, the view goes back to where it was.
  const promptHeight = promptNode ? measured.current.get(promptNode)?.height ?? 0 : 0;
  const beforePrompt = useRef<Viewport | null>(null);
  useEffect(() => {
    if (!promptNode) {
      if (beforePrompt.current) void setViewport(beforePrompt.current, { duration: 150 });
      beforePrompt.current = null;
      return;
    }
    const node = getNode(promptNode);
    if (!node) return;
    beforePrompt.current ??= getViewport();
    const width = node.measured?.width ?? 0;
    const height = node.measured?.height ?? 0;
    const zoom = Math.max(getZoom(), READABLE_ZOOM);
    const pane = document.querySelector<HTMLElement>('[data-testid="canvas"]')?.getBoundingClientRect();
    const room = pane ? pane.height / zoom : Infinity;
    const margin = PROMPT_MARGIN / zoom;
    const y = height + 2 * margin > room ? node.position.y - margin + room / 2 : node.position.y + height / 2;
    void setCenter(node.position.x + width / 2, y, { zoom, duration: 150 });
  }, [promptNode, promptHeight, getNode, getZoom, getViewport, setCenter, setViewport]);

  const raised = useMemo(() => new Set(promptNode ? [promptNode] : []), [promptNode]);
  const flowCompare = useSessionState((state) => state.flowCompare);
  const nodes = useMemo(() => {
    const drawn = toCanvasNodes(flow, { selected: selectedNodes, measured: measured.current, knownKinds, raised });
    if (!flowCompare || readOnly) return drawn;
    return [...drawn, ...ghostNodes(flowCompare.removed)];
    // measureVersion: the measured map changed in place.
  }, [flow, selectedNodes, knownKinds, raised, measureVersion, flowCompare, readOnly]);

  const errorHandles = useMemo(() => {
    const handles = new Set<string>();
    for (const node of flow.nodes) {
      for (const handle of handlesOf(kindOf(catalog, node.type), node.data)) {
        if (handle.kind === 'error') handles.add(`${node.id}/${handle.id}`);
      }
    }
    return handles;
  }, [flow, catalog]);

  const running = runStatus === 'running' || runStatus === 'paused';
  const edges = useMemo(
    () =>
      toCanvasEdges(flow, {
        selected: selectedEdges,
        invalid: readOnly ? NO_IDS : problemEdges,
        active: running ? new Set(activeEdges) : NO_IDS,
        traversed: new Set(traversedEdges),
        errorHandles,
      }),
    [flow, selectedEdges, readOnly, problemEdges, running, activeEdges, traversedEdges, errorHandles],
  );

  const onNodesChange = useCallback(
    (changes: NodeChange<CanvasNode>[]) => {
      const moves: { id: string; x: number; y: number }[] = [];
      let dragEnded = false;
      let sized = false;
      const selections: { id: string; selected: boolean }[] = [];
      for (const change of changes) {
        if (change.type === 'position') {
          if (change.position) moves.push({ id: change.id, ...change.position });
          if (!change.dragging) dragEnded = true;
        } else if (change.type === 'dimensions' && change.dimensions) {
          const previous = measured.current.get(change.id);
          if (previous?.width !== change.dimensions.width || previous?.height !== change.dimensions.height) {
            measured.current.set(change.id, change.dimensions);
            sized = true;
          }
        } else if (change.type === 'select') {
          selections.push({ id: change.id, selected: change.selected });
        }
        // `remove` changes are not taken: Delete goes through the shortcut table, so that
        // it is one undo step and never fires while typing.
      }
      if (sized) setMeasureVersion((version) => version + 1);
      if (readOnly) {
        const picked = selections.filter((change) => change.selected).at(-1);
        if (picked) session.selectInView(picked.id);
        else if (selections.length > 0) session.selectInView(null);
        return;
      }
      if (selections.length > 0) session.canvas.applySelectionChanges(selections, []);
      if (moves.length > 0 || dragEnded) session.canvas.moveNodes(moves, !dragEnded);
    },
    [readOnly, session],
  );

  const onEdgesChange = useCallback(
    (changes: EdgeChange<CanvasEdge>[]) => {
      if (readOnly) return;
      const selections = changes.flatMap((change) =>
        change.type === 'select' ? [{ id: change.id, selected: change.selected }] : [],
      );
      if (selections.length > 0) session.canvas.applySelectionChanges([], selections);
    },
    [readOnly, session],
  );

  const onConnect = useCallback(
    (connection: Connection) => {
      if (!readOnly) session.canvas.connect(connection);
    },
    [readOnly, session],
  );

  // A connection dropped on empty canvas offers the kinds to add there, wired from its handle.
  const onConnectEnd = useCallback(
    (event: MouseEvent | TouchEvent, connection: FinalConnectionState) => {
      if (readOnly || connection.isValid || !connection.fromNode || connection.toNode) return;
      if (connection.fromHandle?.type !== 'source') return;
      const point = 'changedTouches' in event ? event.changedTouches[0] : event;
      if (!point) return;
      setQuickAdd({
        at: { x: point.clientX, y: point.clientY },
        source: connection.fromNode.id,
        sourceHandle: connection.fromHandle.id ?? null,
      });
    },
    [readOnly],
  );

  const addFromQuickMenu = useCallback(
    (kind: KindDescription) => {
      if (!quickAdd) return;
      const position = screenToFlowPosition(quickAdd.at);
      session.canvas.addConnectedNode(kind.id, defaultData(kind), position, {
        source: quickAdd.source,
        sourceHandle: quickAdd.sourceHandle,
      });
      setQuickAdd(null);
    },
    [quickAdd, screenToFlowPosition, session],
  );

  // The minimap moves to the top when it would cover the selected node.
  useEffect(() => {
    const selected = [...selectedNodes][0];
    const node = selected ? getNode(selected) : undefined;
    const pane = document.querySelector<HTMLElement>('[data-testid="canvas"]')?.getBoundingClientRect();
    if (!node || !pane) {
      setMinimapTop(false);
      return;
    }
    const topLeft = flowToScreenPosition(node.position);
    const zoom = getZoom();
    const box = {
      x: topLeft.x,
      y: topLeft.y,
      width: (node.measured?.width ?? 200) * zoom,
      height: (node.measured?.height ?? 80) * zoom,
    };
    const corner = {
      x: pane.right - MINIMAP.width - MINIMAP.margin,
      y: pane.bottom - MINIMAP.height - MINIMAP.margin,
      width: MINIMAP.width,
      height: MINIMAP.height,
    };
    setMinimapTop(overlaps(box, corner));
  }, [selectedNodes, getNode, flowToScreenPosition, getZoom, measureVersion]);

  const minimapClass = useCallback(
    (node: CanvasNode) => `minimap-node status-${nodeStatus[node.id] ?? 'idle'}`,
    [nodeStatus],
  );

  return (
    <div ref={paneRef} className={`canvas ${readOnly ? 'read-only' : ''}`} data-testid="canvas" data-minimap={showMinimap ? (roomy ? 'shown' : 'no-room') : 'hidden'}>
      <ReactFlow<CanvasNode, CanvasEdge>
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypesFor(catalog)}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onConnect={onConnect}
        onConnectEnd={onConnectEnd}
        defaultViewport={initialViewport}
        colorMode={theme}
        nodesDraggable={!readOnly}
        nodesConnectable={!readOnly}
        edgesReconnectable={false}
        deleteKeyCode={null}
        selectionKeyCode="Shift"
        multiSelectionKeyCode={['Shift', 'Meta', 'Control']}
        selectNodesOnDrag={false}
        minZoom={0.1}
        maxZoom={2.5}
        proOptions={{ hideAttribution: true }}
      >
        <Background gap={20} size={1} />
        {showMinimap && roomy && (
          <MiniMap
            pannable
            zoomable
            nodeClassName={minimapClass}
            position={minimapTop ? 'top-right' : 'bottom-right'}
            style={{ width: MINIMAP.width, height: MINIMAP.height }}
          />
        )}
        <Controls showInteractive={false} showFitView={false}>
          <ControlButton data-testid="fit-readable" title="Fit the flow (text stays readable: a wide flow is panned, not shrunk)" onClick={() => fitReadable()}>
            <FitIcon />
          </ControlButton>
          <ControlButton
            data-testid="minimap-toggle"
            title={
              !showMinimap ? 'Show the minimap' : roomy ? 'Hide the minimap' : 'The minimap shows again when the canvas has room (hide it for good)'
            }
            onClick={() => session.layout.set({ minimap: !showMinimap })}
          >
            ▣
          </ControlButton>
        </Controls>
      </ReactFlow>
      {quickAdd && catalog && (
        <QuickAdd kinds={catalog.kinds} at={quickAdd.at} onPick={addFromQuickMenu} onClose={() => setQuickAdd(null)} />
      )}
    </div>
  );
}
