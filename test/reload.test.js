// ./infra/stack reload on a running stack: settings changed in the environment (as an operator edits .env)
// reach nginx, haproxy, varnish and the origin, each the gentlest way it allows: varnish keeps its cache and
// every request served from it is answered while the programs reload; a config a program refuses (a TLS
// certificate that is not one) changes nothing and is named. restart (new code) starts the services again, the
// origin and the resolver on their held sockets, without a request refused.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { base58Url } from '@stack/lib';
import { photo } from './support/images.js';
import { fetchAsBrowser } from './support/kept-alive.js';
import { startStack } from './support/stack.js';
import { tokenUpload } from './support/upload.js';

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
/** the uploaded photograph's public URL */
let source = '';

before(async () => {
  stack = await startStack({ UPLOAD_TOKENS: 'test-token', NGINX_RATE_LIMIT: '100000', NGINX_RATE_BURST: '100000' });
  const response = await tokenUpload(stack.base, fs.readFileSync(photo('Path', '1920x1080')));
  assert.equal(response.status, 200, await response.clone().text());
  source = /** @type {{ url: string }} */ (await response.json()).url;
});
after(() => stack?.stop());

let sentAgain = 0;
/**
 * A JPEG variant of the photograph through the edge, sent again as a browser does when nginx's reload closed
 * the kept-alive connection it went on (counted in `sentAgain`). @param {number} width
 */
const variant = async (width) => {
  const url = `${stack.base}/p/${base58Url.encode(source)}?width=${width}&format=jpeg`;
  const response = await fetchAsBrowser(url, {}, () => (sentAgain += 1));
  const body = Buffer.from(await response.arrayBuffer());
  return { status: response.status, cache: response.headers.get('x-cache'), bytes: body.length };
};

/**
 * Asks `ask` one request after another until `during` settles; how many answers of each key `ask` gave.
 * @param {Promise<unknown>} during @param {() => Promise<string>} ask @returns {Promise<Record<string, number>>}
 */
async function countDuring(during, ask) {
  let done = false;
  during.then(
    () => (done = true),
    () => (done = true),
  );
  /** @type {Record<string, number>} */
  const counts = {};
  while (!done) {
    const key = await ask();
    counts[key] = (counts[key] || 0) + 1;
  }
  return counts;
}

/** The pids of the programs that reload in place, of the origin's socket holder and of the origin. */
const pids = async () => ({
  varnish: await stack.pid('varnish'),
  nginx: await stack.pid('nginx'),
  haproxy: await stack.pid('haproxy'),
  holder: await stack.pid('origin'),
  origin: await stack.servicePid('origin'),
});

test('settings changed and reloaded: nginx, haproxy, varnish and the origin take theirs; varnish keeps its cache and every hit is served meanwhile', async () => {
  const before80 = await variant(400);
  assert.equal(before80.status, 200);
  assert.equal((await variant(400)).cache, 'HIT');
  const then = await pids();
  const reloading = stack.reload({
    JPEG_QUALITY: '40',
    VARNISH_GRACE_HEALTHY_S: '33',
    HAPROXY_ORIGIN_MAXCONN: '37',
    NGINX_RATE_BURST: '99999',
  });
  // hits, one after another, for as long as the reload runs; and misses, each a new variant the origin makes,
  // all through its restart
  let width = 1000;
  const [statuses, misses] = await Promise.all([
    countDuring(reloading, async () => {
      const { status, cache } = await variant(400);
      return `${status} ${cache}`;
    }),
    countDuring(reloading, async () => String((await variant(width++)).status)),
  ]);
  const output = await reloading;
  const said = output.stdout;
  for (const line of [/^origin: restarted/m, /^haproxy: reloaded/m, /^varnish: reloaded/m, /^nginx: reloaded/m])
    assert.match(said, line);
  // what none of these settings concerns is left running
  assert.doesNotMatch(said, /^(avatar-resolver|purge-service|redis|prometheus):/m);
  assert.deepEqual(Object.keys(statuses), ['200 HIT'], `${JSON.stringify(statuses)}, sent again: ${sentAgain}`);
  assert.ok(statuses['200 HIT'] >= 5, JSON.stringify(statuses));
  // the origin's restart refused none: the misses of its gap waited on its held socket
  assert.deepEqual(Object.keys(misses), ['200'], JSON.stringify(misses));
  // reloaded in place: the same processes (haproxy's and nginx's masters, varnish's manager, the origin's
  // socket holder); the origin anew
  const now = await pids();
  assert.deepEqual(
    [now.varnish, now.nginx, now.haproxy, now.holder],
    [then.varnish, then.nginx, then.haproxy, then.holder],
  );
  assert.notEqual(now.origin, then.origin);
  // varnish's cache survived; its new VCL is the one in use
  assert.equal((await variant(400)).cache, 'HIT');
  const vcls = execFileSync('varnishadm', ['-n', path.join(stack.dir, 'run', 'varnish'), 'vcl.list'], {
    encoding: 'utf8',
  });
  assert.match(vcls, /^active\s.*\sreload_\d+$/m, vcls);
  // and the one it replaced is discarded (infra/docker/varnish-reload.sh --use), not left loaded
  assert.doesNotMatch(vcls, /^available\s.*\sboot$/m, vcls);
  // haproxy's new limit, and the origin's new quality: a variant made now is far smaller
  const server = (await stack.haproxyStats()).find((row) => row.pxname === 'be_images' && row.svname !== 'BACKEND');
  assert.equal(server?.slim, '37');
  const after40 = await variant(401);
  assert.equal(after40.status, 200);
  assert.ok(after40.bytes < before80.bytes * 0.8, `quality 40: ${after40.bytes} bytes, quality 80: ${before80.bytes}`);
});

test('restart (new code checked out): the origin and the resolver start again on their held sockets, every miss and avatar answered meanwhile', async () => {
  const then = await pids();
  const resolverThen = await stack.servicePid('avatar-resolver');
  const restarting = stack.restart('origin', 'avatar-resolver');
  // misses, each a new variant the origin makes, and avatars no cache holds yet, each a question to the resolver
  let width = 2000;
  let account = 0;
  const [misses, avatars] = await Promise.all([
    countDuring(restarting, async () => String((await variant(width++)).status)),
    countDuring(restarting, async () => {
      const response = await fetch(`${stack.base}/u/restart${account++}/avatar`, { redirect: 'manual' });
      await response.arrayBuffer();
      return String(response.status);
    }),
  ]);
  const output = await restarting;
  assert.match(output.stdout, /^origin: restarted \(its socket held, no request refused\)$/m);
  assert.match(output.stdout, /^avatar-resolver: restarted \(its socket held/m);
  assert.deepEqual(Object.keys(misses), ['200'], JSON.stringify(misses));
  assert.deepEqual(Object.keys(avatars), ['302'], JSON.stringify(avatars));
  const now = await pids();
  assert.equal(now.holder, then.holder);
  assert.notEqual(now.origin, then.origin);
  assert.notEqual(await stack.servicePid('avatar-resolver'), resolverThen);
  // status names the new process under the same holder, started just now
  const { stdout: status } = await stack.status();
  const serving = new RegExp(
    `^origin +serving   pid ${now.origin}, uptime 0:00:\\d\\d \\(under its socket holder, pid ${then.holder}\\)$`,
    'm',
  );
  assert.match(status, serving);
  assert.match(status, /^avatar-resolver +serving   pid \d+, uptime /m);
  await assert.rejects(stack.restart('no-such-program'), (/** @type {any} */ err) => {
    assert.equal(err.code, 2);
    assert.match(err.stderr, /no program no-such-program/);
    return true;
  });
});

test('a config nginx refuses (a TLS certificate that is not one): the reload fails naming it, and nothing changes', async () => {
  const bad = path.join(stack.dir, 'not-a-certificate.pem');
  fs.writeFileSync(bad, 'not a certificate\n');
  const then = await pids();
  const nginxConf = fs.readFileSync(path.join(stack.dir, 'conf', 'nginx.conf'), 'utf8');
  await assert.rejects(stack.reload({ NGINX_TLS_CERT: bad, NGINX_TLS_KEY: bad, JPEG_QUALITY: '60' }), (err) => {
    const failure = /** @type {{ code: number, stderr: string }} */ (err);
    assert.equal(failure.code, 1);
    assert.match(failure.stderr, /nginx refuses the new config/);
    assert.match(failure.stderr, /nothing was reloaded/);
    return true;
  });
  assert.deepEqual(await pids(), then);
  // the files are those the programs run: no TLS listener, no certificate left beside them
  assert.equal(fs.readFileSync(path.join(stack.dir, 'conf', 'nginx.conf'), 'utf8'), nginxConf);
  assert.equal(fs.existsSync(path.join(stack.dir, 'conf', 'tls', 'cert.pem')), false);
  assert.equal((await variant(400)).status, 200);
});
