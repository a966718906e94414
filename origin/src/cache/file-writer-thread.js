// The FileWriter's thread: temp file, then rename into place (the directory made first when asked).
import fs from 'node:fs';
import path from 'node:path';
import { parentPort } from 'node:worker_threads';

const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);

port.on('message', (/** @type {{ id: number, temp: string, target: string, data: Uint8Array, makeDir: boolean }} */ { id, temp, target, data, makeDir }) => {
  try {
    if (makeDir) fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(temp, data);
    fs.renameSync(temp, target);
    port.postMessage({ id });
  } catch (err) {
    fs.rmSync(temp, { force: true });
    port.postMessage({ id, error: /** @type {Error} */ (err).message });
  }
});
