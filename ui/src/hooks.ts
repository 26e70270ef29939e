// React access to the framework-free stores: a context for the session and selector hooks
// over useSyncExternalStore. Selectors must return values that stay identical while what
// they select is unchanged (a field of the snapshot, a primitive), or React re-renders
// forever.

import { createContext, useContext, useSyncExternalStore } from 'react';
import type { CanvasState } from './canvasStore';
import type { Layout } from './layout';
import type { RunView } from './runStore';
import type { Session, SessionState } from './session';

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside <SessionContext.Provider>');
  return session;
}

interface ExternalStore<T> {
  subscribe(listener: () => void): () => void;
  getSnapshot(): T;
}

function useSelected<T, S>(store: ExternalStore<T>, select: (state: T) => S): S {
  return useSyncExternalStore(store.subscribe, () => select(store.getSnapshot()));
}

export function useSessionState<S>(select: (state: SessionState) => S): S {
  const session = useSession();
  return useSelected(session, select);
}

export function useCanvas<S>(select: (state: CanvasState) => S): S {
  const session = useSession();
  return useSelected(session.canvas, select);
}

export function useRun<S>(select: (view: RunView) => S): S {
  const session = useSession();
  return useSelected(session.run, select);
}

export function useLayout<S>(select: (layout: Layout) => S): S {
  const session = useSession();
  return useSelected(session.layout, select);
}
