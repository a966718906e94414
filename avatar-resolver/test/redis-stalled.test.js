// Redis that stops answering without going away (a process stopped, a network that drops packets: no reset,
// so the connection looks alive for minutes) is met as Redis down is: an avatar is answered from the upstream
// within seconds, not when haproxy gives up on the request, and the lookups after it do not wait on Redis.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hiveAccount, startResolver } from './harness.js';

test('Redis stopped (SIGSTOP): an avatar is still answered within seconds, and all is as before once it runs', async (t) => {
  const resolver = await startResolver();
  t.after(async () => {
    resolver.redis.proc.child.kill('SIGCONT');
    await resolver.stop();
  });
  resolver.hive.setAccount(hiveAccount('stalled', { profile: { profile_image: 'https://img.example/s.png' } }));
  resolver.hive.setAccount(hiveAccount('later', { profile: { profile_image: 'https://img.example/l.png' } }));
  resolver.redis.proc.child.kill('SIGSTOP');
  const started = Date.now();
  const response = await resolver.get('/u/stalled/avatar', { signal: AbortSignal.timeout(30_000) });
  const took = Date.now() - started;
  assert.equal(response.status, 302);
  assert.match(String(response.headers.get('location')), /\/p\//);
  assert.ok(took < 4_000, `answered after ${took} ms`);
  // the timed-out command dropped the connection: while Redis stays stopped, lookups skip it at once
  for (const name of ['stalled2', 'stalled3']) {
    resolver.hive.setAccount(hiveAccount(name, { profile: { profile_image: `https://img.example/${name}.png` } }));
    const from = Date.now();
    const next = await resolver.get(`/u/${name}/avatar`, { signal: AbortSignal.timeout(30_000) });
    assert.equal(next.status, 302);
    assert.ok(Date.now() - from < 1_000, `${name} answered after ${Date.now() - from} ms`);
  }
  resolver.redis.proc.child.kill('SIGCONT');
  const after = await resolver.get('/u/later/avatar', { signal: AbortSignal.timeout(30_000) });
  assert.equal(after.status, 302);
});
