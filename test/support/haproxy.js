// haproxy alone, rendered from the stack's settings (infra/render.js) with a test's own, in front of one
// stand-in service on a free port, on TCP (its socket is another bind of the same frontend).
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { renderAll } from '../../infra/render.js';
import { resolveSettings } from '../../infra/resolve.js';
import { freePort, waitFor } from './ports.js';
import { startProcess } from './processes.js';

/**
 * Starts the stand-in and haproxy in front of it; resolves once haproxy answers through it.
 * @param {http.RequestListener} listener the stand-in service
 * @param {Record<string, string>} [settings] the test's own settings
 * @returns {Promise<{ base: string, stop(): Promise<void> }>}
 */
export async function startHaproxy(listener, settings = {}) {
  const service = http.createServer(listener);
  const port = await freePort();
  await new Promise((resolve) => service.listen(port, '127.0.0.1', () => resolve(null)));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'haproxy-'));
  const imagesPort = await freePort();
  const config = await resolveSettings({
    ENV_FILE: '/nonexistent',
    STACK_DIR: dir,
    INTERNAL_SOCKETS: 'false',
    HAPROXY_IMAGES_PORT: String(imagesPort),
    HAPROXY_AVATARS_PORT: String(await freePort()),
    HAPROXY_STATS_PORT: String(await freePort()),
    HAPROXY_STATS_PASSWORD: 'x',
    ORIGIN_SERVERS: `127.0.0.1:${port}`,
    ...settings,
  });
  renderAll(config);
  const haproxy = startProcess('haproxy', ['-db', '-f', path.join(dir, 'conf', 'haproxy.cfg')]);
  const base = `http://127.0.0.1:${imagesPort}`;
  await waitFor(async () => (await fetch(`${base}/healthz`)).status === 200, 15_000, 'haproxy with its server up');
  return {
    base,
    async stop() {
      await haproxy.stop();
      service.closeAllConnections();
      await new Promise((resolve) => service.close(resolve));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
