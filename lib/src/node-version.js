// Imported first by every command-line entry point. Under a Node older than the project's (Debian 12 ships
// Node 20), `import.meta.main` is undefined and an entry point's main would not run: the command would exit 0
// having done nothing. It stops instead, and says what to run; likewise before `npm ci`.
import fs from 'node:fs';
import path from 'node:path';

const NEEDED = 24;
const script = process.argv[1] ? path.relative(process.cwd(), process.argv[1]) : 'this command';
const major = Number(process.versions.node.split('.')[0]);
if (major < NEEDED) {
  process.stderr.write(
    `${script} needs Node ${NEEDED} or newer; this is ${process.version} (${process.execPath}).\n` +
      `Run it through ./infra/stack (install, render, up, test …), which installs Node ${NEEDED} into .tools/ first, ` +
      `or put .tools/node-v${NEEDED}.*/bin first on PATH.\n`,
  );
  process.exit(1);
}
// (import.meta.dirname, not the URL's pathname: a checkout's path may hold a space, %20 in a URL)
const root = path.resolve(import.meta.dirname, '../..');
if (!fs.existsSync(path.join(root, 'node_modules', '.package-lock.json'))) {
  process.stderr.write(`${script} needs the npm modules: run ./infra/stack install (or npm ci) first.\n`);
  process.exit(1);
}
