import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import '@xyflow/react/dist/style.css';
import './styles.css';
import { App } from './App';
import { tauriApi } from './api';
import { Session } from './session';
import { markStartup } from './startup';

markStartup('script');

const session = new Session(tauriApi);
void session.init();

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App session={session} />
  </StrictMode>,
);
