// nginx/hosts.lua, how nginx's Lua finds a next hop given by name (/etc/hosts first, as libc does): run for
// real in Debian's nginx on a unix socket of this test's own, the module as infra/render.js renders it,
// reading a hosts file of this test's own (the module's `path`), so names can move, come and go.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { Agent, fetch } from 'undici';
import { renderAll } from '../render.js';
import { resolveSettings } from '../resolve.js';
import { waitFor } from '../../test/support/ports.js';

/**
 * A started nginx whose /a?host=H answers `require("hosts").address(H)` and /u?host=H&port=P its
 * `upstream(H, P)`, each with the milliseconds the call took (`X-Took-Ms`); `hosts` is the file it reads.
 * @param {import('node:test').TestContext} t
 */
async function scene(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hosts-lua-'));
  // nginx's workers run as nobody when this test is root: they read the hosts file and the module
  fs.chmodSync(dir, 0o755);
  const config = await resolveSettings({ ENV_FILE: '/nonexistent', STACK_DIR: path.join(dir, 'stack') });
  const lua = path.join(renderAll(config).CONF_DIR, 'nginx');
  const hosts = path.join(dir, 'hosts');
  fs.writeFileSync(hosts, '127.0.0.1 localhost\n', { mode: 0o644 });
  const socket = path.join(dir, 'nginx.sock');
  const call = (/** @type {string} */ expression) => `content_by_lua_block {
        local hosts = require("hosts")
        ngx.update_time()
        local started = ngx.now()
        local answer = ${expression}
        ngx.update_time()
        ngx.header["X-Took-Ms"] = string.format("%.0f", (ngx.now() - started) * 1000)
        ngx.print(answer)
      }`;
  fs.writeFileSync(
    path.join(dir, 'nginx.conf'),
    `load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
events {}
http {
  access_log off;
  # Debian's nginx would make its temporary directories under /var/lib/nginx, root's
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  lua_package_path "${lua}/?.lua;;";
  init_by_lua_block { require("hosts").path = "${hosts}" }
  server {
    listen unix:${socket};
    location /a { ${call('hosts.address(ngx.unescape_uri(ngx.var.arg_host))')} }
    location /u { ${call('hosts.upstream(ngx.unescape_uri(ngx.var.arg_host), ngx.var.arg_port or "")')} }
  }
}
`,
  );
  const nginx = spawn('nginx', ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'error.log')], {
    stdio: 'ignore',
  });
  t.after(async () => {
    if (nginx.exitCode === null) {
      const exited = new Promise((resolve) => nginx.once('exit', resolve));
      nginx.kill('SIGQUIT');
      await exited;
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const dispatcher = new Agent({ connect: { socketPath: socket } });
  t.after(() => dispatcher.close());
  /** @param {string} pathAndQuery */
  const get = async (pathAndQuery) => {
    const response = await fetch(`http://nginx${pathAndQuery}`, { dispatcher });
    return { body: await response.text(), took: Number(response.headers.get('x-took-ms')) };
  };
  await waitFor(async () => fs.existsSync(socket), 10_000, 'nginx listening');
  return {
    hosts,
    get,
    address: async (/** @type {string} */ host) => (await get(`/a?host=${encodeURIComponent(host)}`)).body,
    upstream: async (/** @type {string} */ host, /** @type {string} */ port) =>
      (await get(`/u?host=${encodeURIComponent(host)}&port=${port}`)).body,
  };
}

test('a name is found as libc finds it: the first line naming it, any case, whole fields before a #', async (t) => {
  const { hosts, address, upstream } = await scene(t);
  fs.writeFileSync(
    hosts,
    [
      '# purge-service 10.9.9.1: a comment line',
      '127.0.0.1 localhost',
      '10.9.9.2 ads.purge-service.example  # purge-service in a comment',
      '10.9.9.3',
      '10.0.0.2\tPurge-Service   purge-alias',
      '10.0.0.3 purge-service',
      'fd00::5 varnish-b.example',
      '10.0.0.4 last-line-without-newline',
    ].join('\n'),
  );
  await waitFor(async () => (await address('purge-service')) === '10.0.0.2', 5_000, 'the new file read');
  assert.equal(await address('PURGE-SERVICE'), '10.0.0.2');
  assert.equal(await address('purge-alias'), '10.0.0.2');
  assert.equal(await address('last-line-without-newline'), '10.0.0.4');
  assert.equal(await upstream('varnish-b.example', '6081'), '[fd00::5]:6081');
  assert.equal(await upstream('purge-alias', '8802'), '10.0.0.2:8802');
  // not a whole field, or nowhere: the name as it is, for nginx's resolver
  for (const name of ['service', 'purge', 'ads.purge-service', 'purge-service.example', 'nowhere.example'])
    assert.equal(await address(name), name);
  // addresses as they are, an IPv6 one without its brackets
  assert.equal(await address('10.1.2.3'), '10.1.2.3');
  assert.equal(await address('[::1]'), '::1');
  assert.equal(await upstream('[::1]', '80'), '[::1]:80');
});

test('a name moved, added or removed in the file is followed within seconds', async (t) => {
  const { hosts, address } = await scene(t);
  // asked before it is there: the name as it is, and then it appears
  assert.equal(await address('varnish-c.example'), 'varnish-c.example');
  fs.writeFileSync(hosts, '127.0.0.1 localhost\n10.0.0.7 varnish-c.example\n');
  await waitFor(async () => (await address('varnish-c.example')) === '10.0.0.7', 5_000, 'the name added');
  fs.writeFileSync(hosts, '127.0.0.1 localhost\n10.0.0.8 varnish-c.example\n');
  await waitFor(async () => (await address('varnish-c.example')) === '10.0.0.8', 5_000, 'the name moved');
  fs.writeFileSync(hosts, '127.0.0.1 localhost\n');
  await waitFor(async () => (await address('varnish-c.example')) === 'varnish-c.example', 5_000, 'the name gone');
});

test("a blocklist's hosts file (200,000 lines) does not hold up nginx's worker each second it is read", async (t) => {
  const { hosts, get } = await scene(t);
  const lines = ['127.0.0.1 localhost'];
  for (let i = 0; i < 200_000; i += 1) lines.push(`0.0.0.0 ads${i}.tracker${i % 97}.example # blocked`);
  lines.push('10.0.0.9 purge-service', '');
  fs.writeFileSync(hosts, lines.join('\n'));
  await waitFor(async () => (await get('/a?host=purge-service')).body === '10.0.0.9', 5_000, 'the big file read');
  // asked for three seconds, past three re-reads: parsing every line took about a second each time
  let took = 0;
  let asked = 0;
  for (const until = Date.now() + 3_000; Date.now() < until; asked += 1) {
    const answer = await get('/a?host=purge-service');
    assert.equal(answer.body, '10.0.0.9');
    took += answer.took;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.equal((await get(`/a?host=ads199999.tracker${199_999 % 97}.example`)).body, '0.0.0.0');
  // a generous sanity bound: reading the 10 MB file is a few ms; the speed is not what this test measures
  assert.ok(took < 1_000, `${asked} lookups took ${took} ms of nginx's worker`);
});
