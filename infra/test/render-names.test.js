// Names a hop resolves at run time (compose's containers, the chart's Services): haproxy's servers given by
// name follow their address through its resolvers, nginx reaches a purge service given by name through its
// resolver; addresses and sockets stay as they were (nothing resolved, kept-alive upstreams).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { haproxyValues } from '../render/haproxy.js';
import { nginxValues } from '../render/nginx.js';
import { supervisorValues } from '../render/supervisor.js';

/** haproxy's values for these servers. @param {Record<string, any>} servers */
const haproxy = (servers) =>
  haproxyValues({
    ORIGIN_SERVERS: [],
    AVATAR_SERVERS: [],
    ORIGIN_DISCOVERY: '',
    ORIGIN_DISCOVERY_SLOTS: 4,
    HAPROXY_ORIGIN_MAXCONN: 0,
    HAPROXY_UPLOAD_MAXCONN: 4,
    HAPROXY_STATS_PASSWORD: 'x',
    LISTEN_ADDRESS: '127.0.0.1',
    HAPROXY_IMAGES_PORT: 8081,
    HAPROXY_AVATARS_PORT: 8082,
    ...servers,
  });

test('haproxy: a server by name follows its address at run time; one by address or socket is not resolved', () => {
  const named = haproxy({ ORIGIN_SERVERS: ['origin.example.internal:8800'], AVATAR_SERVERS: ['avatar-resolver:8801'] });
  assert.match(named.HAPROXY_RESOLVERS, /^resolvers system\n {2}parse-resolv-conf\n/);
  // a name DNS does not know (kept in /etc/hosts) keeps its address: not put in maintenance
  assert.match(named.HAPROXY_RESOLVERS, /hold nx 1h\n {2}hold other 1h\n {2}hold refused 1h\n {2}hold timeout 1h\n/);
  assert.match(named.HAPROXY_RESOLVERS, /hold obsolete 5s/);
  assert.match(
    named.ORIGIN_SERVER_LINES,
    /server origin1 origin\.example\.internal:8800 check .* resolvers system init-addr libc,none$/,
  );
  assert.match(named.UPLOAD_SERVER_LINES, /track be_images\/origin1 .* resolvers system init-addr libc,none$/);
  assert.match(
    named.AVATAR_SERVER_LINES,
    /server resolver1 avatar-resolver:8801 check .* resolvers system init-addr libc,none$/,
  );

  const addressed = haproxy({
    ORIGIN_SERVERS: ['unix@/run/origin.sock', '[::1]:8800'],
    AVATAR_SERVERS: ['10.0.0.2:8801'],
  });
  assert.doesNotMatch(addressed.HAPROXY_RESOLVERS, /resolvers system/);
  for (const lines of [addressed.ORIGIN_SERVER_LINES, addressed.UPLOAD_SERVER_LINES, addressed.AVATAR_SERVER_LINES])
    assert.doesNotMatch(lines, /resolvers/);

  const discovered = haproxy({ ORIGIN_DISCOVERY: 'origin:8800', AVATAR_SERVERS: ['10.0.0.2:8801'] });
  assert.match(discovered.HAPROXY_RESOLVERS, /^resolvers system/);
  assert.match(
    discovered.ORIGIN_SERVER_LINES,
    /server-template origin 1-4 origin:8800 check resolvers system init-addr none/,
  );
  // uploads' slots check for themselves, as be_images' servers do (haproxy.cfg.template's default-server)
  assert.match(
    discovered.UPLOAD_SERVER_LINES,
    /server-template origin 1-4 origin:8800 check .* inter 2s downinter 250ms fall 2 rise 1$/,
  );
});

test('nginx: a purge service by name is resolved at run time (/etc/hosts, then DNS), in its route; by address, a kept-alive upstream', () => {
  /** @param {string} upstream */
  const values = (upstream) =>
    nginxValues(
      {
        UPLOAD_MAX_BYTES: 1024,
        HAPROXY_SERVER_TIMEOUT_S: 60,
        NGINX_WORKER_CONNECTIONS: 1024,
        NGINX_TRUSTED_PROXIES: [],
        NGINX_BIND: '127.0.0.1',
        HAPROXY_HOST: '127.0.0.1',
        HAPROXY_SOCKETS: true,
        EDGE_VARNISH_NODES: [],
        STACK_DIR: '/stack',
        PURGE_SERVICE_UPSTREAM: upstream,
      },
      { CONF_DIR: '/stack/conf' },
    );
  for (const upstream of ['127.0.0.1:8802', 'unix:/stack/run/purge.sock']) {
    const byAddress = values(upstream);
    assert.equal(
      byAddress.NGINX_PURGE_UPSTREAM,
      `upstream purge_service {\n    server ${upstream};\n    keepalive 8;\n  }`,
    );
    assert.equal(byAddress.NGINX_PURGE_PASS, 'proxy_pass http://purge_service;');
    assert.match(byAddress.NGINX_RESOLVER, /^# every host by address/);
  }
  const byName = values('purge-service:8802');
  assert.match(byName.NGINX_PURGE_UPSTREAM, /^# /, 'no upstream block: it would be resolved once');
  // its address per request: /etc/hosts first (nginx/hosts.lua), else the name for nginx's resolver
  assert.equal(
    byName.NGINX_PURGE_PASS,
    [
      'set_by_lua_block $purge_service { return require("hosts").upstream("purge-service", "8802") }',
      'proxy_pass http://$purge_service;',
      'proxy_set_header Host "purge-service:8802";',
    ].join('\n      '),
  );
  // one nameserver, the first of resolv.conf (nginx takes any one's "no such name" as the answer)
  assert.match(byName.NGINX_RESOLVER, /^resolver \S+ valid=5s;$/);
});

const dirs = { DATA_ROOT: '/s/data', LOG_DIR: '/s/logs', RUN_DIR: '/s/run', CONF_DIR: '/s/conf' };
/** supervisord's values for these settings. @param {Record<string, any>} settings */
const supervisor = (settings) =>
  supervisorValues(
    {
      STACK_DIR: '/s',
      HAPROXY_HOST: '127.0.0.1',
      EDGE_VARNISH_NODES: [],
      ORIGIN_SERVERS: [],
      AVATAR_SERVERS: [],
      ORIGIN_SOCKET: '',
      AVATAR_RESOLVER_SOCKET: '',
      ...settings,
    },
    dirs,
  );

test('supervisord: nginx with varnish nodes by name is started by the follower of their addresses; by address, alone', () => {
  const nginx = 'nginx -p /s/run/nginx -c /s/conf/nginx.conf -e /s/logs/nginx-error.log';
  const command = (/** @type {string[]} */ nodes) => supervisor({ EDGE_VARNISH_NODES: nodes }).NGINX_COMMAND;
  assert.equal(command([]), nginx);
  assert.equal(command(['10.0.0.1:6081', '[::1]:6081']), nginx);
  const followed = command(['varnish-a.example.internal:6081', '10.0.0.2:6081', 'varnish-c:6081']);
  assert.match(
    followed,
    /^\S+\/infra\/docker\/follow-address\.sh 2 "nginx -p \S+ -c \S+ -e \S+ -s reload" varnish-a\.example\.internal:6081,varnish-c:6081 -- nginx -p /,
  );
  assert.ok(followed.endsWith(` -- ${nginx}`));
});

test('supervisord: haproxy with origins or resolvers by name is started by the follower, reloaded by SIGUSR2', () => {
  const haproxy = 'haproxy -W -db -f /s/conf/haproxy.cfg';
  const command = (/** @type {string[]} */ origins, /** @type {string[]} */ resolvers) =>
    supervisor({ ORIGIN_SERVERS: origins, AVATAR_SERVERS: resolvers }).HAPROXY_COMMAND;
  assert.equal(command(['unix@/s/run/origin/origin.sock'], ['unix@/s/run/resolver/resolver.sock']), haproxy);
  assert.equal(command(['10.0.0.1:8800'], ['10.0.0.1:8801']), haproxy);
  assert.match(
    command(['origin-a:8800', '10.0.0.2:8800'], ['resolver-a.internal:8801']),
    /^\S+\/infra\/docker\/follow-address\.sh 2 "kill -USR2 \$FOLLOWED" origin-a:8800,resolver-a\.internal:8801 -- haproxy -W -db -f \/s\/conf\/haproxy\.cfg$/,
  );
});

test('supervisord: varnish with haproxy by name is started by the follower, its VCL loaded again when it moves', () => {
  const command = (/** @type {string} */ host) => supervisor({ HAPROXY_HOST: host }).VARNISH_FOLLOWER;
  assert.equal(command('127.0.0.1'), '');
  assert.equal(command('::1'), '');
  assert.match(
    command('haproxy.example.internal'),
    /^\S+\/infra\/docker\/follow-address\.sh 2 "\S+\/infra\/docker\/varnish-reload\.sh \/s\/run\/varnish \/s\/conf\/varnish\/default\.vcl" haproxy\.example\.internal -- $/,
  );
});
