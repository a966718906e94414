// Keeps the log files nginx writes itself (access and error log) from filling the disk: past a size a file
// is renamed to .1 (older ones shift up, the last is dropped) and nginx is told to reopen its logs (USR1).
// mtail follows the access log by path: it finishes the renamed file, then reads the new one, losing nothing.
// Run by supervisord in the native stack (the other programs' output is rotated by supervisord itself):
//   node infra/rotate-logs.js --pid-file <nginx.pid> --max-bytes <n> --keep <n> --every <seconds> <log>...
import fs from 'node:fs';
import { parseArgs } from 'node:util';

const { values, positionals: logs } = parseArgs({
  allowPositionals: true,
  options: {
    'pid-file': { type: 'string' },
    'max-bytes': { type: 'string' },
    keep: { type: 'string' },
    every: { type: 'string' },
  },
});
const maxBytes = Number(values['max-bytes']);
const keep = Math.max(1, Number(values.keep));
const everyMs = Number(values.every) * 1000;
if (!values['pid-file'] || !(maxBytes > 0) || !(everyMs > 0) || !logs.length) {
  process.stderr.write(
    'usage: rotate-logs.js --pid-file <file> --max-bytes <n> --keep <n> --every <seconds> <log>...\n',
  );
  process.exit(2);
}

/** @param {string} file */
function size(file) {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

/** file.(keep-1) → file.keep, …, file → file.1 @param {string} file */
function shift(file) {
  for (let n = keep - 1; n >= 1; n -= 1) {
    if (fs.existsSync(`${file}.${n}`)) fs.renameSync(`${file}.${n}`, `${file}.${n + 1}`);
  }
  fs.renameSync(file, `${file}.1`);
}

function check() {
  const due = logs.filter((file) => size(file) > maxBytes);
  if (!due.length) return;
  for (const file of due) shift(file);
  try {
    process.kill(Number(fs.readFileSync(/** @type {string} */ (values['pid-file']), 'utf8').trim()), 'SIGUSR1');
    process.stdout.write(`${new Date().toISOString()} rotated ${due.join(', ')}\n`);
  } catch (err) {
    // nginx not running (restarting): it opens fresh files when it starts
    process.stdout.write(
      `${new Date().toISOString()} rotated ${due.join(', ')}; nginx not told: ${/** @type {Error} */ (err).message}\n`,
    );
  }
}

check();
setInterval(check, everyMs);
