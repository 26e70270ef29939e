import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { flushSync } from 'react-dom';
import '@xyflow/react/dist/style.css';
import './styles.css';
import { App } from './App';
import { tauriApi } from './api';
import { Session } from './session';
import { markStartup } from './startup';

markStartup('script');

const session = new Session(tauriApi);
const root = createRoot(document.getElementById('root')!);
let drawn = false;

/** Draws the window, once. It waits for the engine's kinds (one quick call), so that the
 *  first frame has the palette and the start node, and it draws synchronously: React's effects,
 *  React Flow's set-up among them, then run before that frame is painted instead of in a
 *  second burst right after it, which held back the first input the window could take. */
function drawWindow(): void {
  if (drawn) return;
  drawn = true;
  flushSync(() =>
    root.render(
      <StrictMode>
        <App session={session} />
      </StrictMode>,
    ),
  );
}

void session.init(drawWindow);
// An engine slow to answer still gets its window at once: the palette fills in when the kinds come.
setTimeout(drawWindow, 1000);
