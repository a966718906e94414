import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { redactUrl } from '../src/index.js';

test('request URLs are logged without bearer material', () => {
  assert.equal(redactUrl('/hs/eyJhbGciOi.secret'), '/hs/[redacted]');
  assert.equal(redactUrl('/.upload-check/hs/abc?x=1'), '/.upload-check/hs/[redacted]?x=1');
  assert.equal(redactUrl('/p/3q5?width=9&token=0123abcd&format=webp'), '/p/3q5?width=9&token=[redacted]&format=webp');
  assert.equal(redactUrl('/DQmX/photo.jpg'), '/DQmX/photo.jpg');
});

test('a line a quiet service logs reaches its stdout within about a second, not at 4 KB or at exit', async () => {
  // a service that logs one warning, then stays up doing nothing
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { createLogger } from ${JSON.stringify(new URL('../src/log.js', import.meta.url).href)};
       createLogger('probe', 'info').warn('S3 read failed');
       setTimeout(() => {}, 30_000);`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    const line = await new Promise((resolve, reject) => {
      // a second's flush interval, and the child's start on a busy machine
      const timer = setTimeout(() => reject(new Error('no line on stdout after 10 s')), 10_000);
      child.stdout.once('data', (chunk) => {
        clearTimeout(timer);
        resolve(String(chunk));
      });
    });
    assert.equal(JSON.parse(String(line)).msg, 'S3 read failed');
  } finally {
    child.kill();
  }
});
