// The FileWriter's thread: temp file, then rename into place; a directory is made once.
import fs from 'node:fs';
import path from 'node:path';
import { parentPort } from 'node:worker_threads';

const made = new Set();
const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);

port.on('message', (/** @type {{ id: number, temp: string, target: string, data: Uint8Array }} */ { id, temp, target, data }) => {
  try {
    const dir = path.dirname(target);
    if (!made.has(dir)) {
      fs.mkdirSync(dir, { recursive: true });
      made.add(dir);
    }
    fs.writeFileSync(temp, data);
    fs.renameSync(temp, target);
    port.postMessage({ id });
  } catch (err) {
    fs.rmSync(temp, { force: true });
    port.postMessage({ id, error: /** @type {Error} */ (err).message });
  }
});
