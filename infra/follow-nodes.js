// Keeps nginx's varnish nodes at the addresses their names have now (the Helm chart: nginx names each varnish
// pod, EDGE_VARNISH_NODES, and a pod replaced has a new address). nginx resolves an upstream server's name when
// it loads its config, never again (open source nginx 1.22 has no `resolve`): a varnish pod replaced (an
// upgrade, a lost node, a crash) left nginx sending that node's share to an address nobody has ("No route to
// host") until nginx itself restarted; with one varnish node, everything (a CI run: an upgrade's new nginx pod
// never Ready in 8 minutes). Every --every seconds this resolves each node's name; when the addresses differ
// from the last ones seen, nginx reloads (SIGHUP: it resolves them again; its open connections finish on the
// old workers). The first look reloads a running nginx too: it may have resolved before the DNS had the
// current addresses. While a name does not resolve (a pod not created yet) nothing is done: nginx would refuse
// the config, and keeps the one it runs.
//   node infra/follow-nodes.js --pid-file <nginx.pid> --every <seconds> <host:port>[,<host:port>…]
import dns from 'node:dns/promises';
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { nodeHost } from './render/nginx.js';

/**
 * The addresses of each node's name, or null while one does not resolve. @param {string[]} nodes
 * @param {(host: string) => Promise<string[]>} lookup @returns {Promise<Record<string, string[]> | null>}
 */
export async function addressesOf(nodes, lookup) {
  /** @type {Record<string, string[]>} */
  const addresses = {};
  for (const node of nodes) {
    try {
      addresses[node] = [...(await lookup(nodeHost(node)))].sort();
    } catch {
      return null;
    }
  }
  return addresses;
}

/**
 * One look every `everyMs`: `reload` is called at the first look that resolves every name and whenever the
 * addresses change. Returns a function that stops it.
 * @param {{ nodes: string[], everyMs: number, lookup: (host: string) => Promise<string[]>,
 *   reload: (from: Record<string, string[]> | null, to: Record<string, string[]>) => void }} options
 */
export function followNodes({ nodes, everyMs, lookup, reload }) {
  /** @type {Record<string, string[]> | null} */
  let last = null;
  let stopped = false;
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  const look = async () => {
    const now = await addressesOf(nodes, lookup);
    if (stopped) return;
    if (now && JSON.stringify(now) !== JSON.stringify(last)) {
      reload(last, now);
      last = now;
    }
    timer = setTimeout(look, everyMs);
  };
  look();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** Every address of `host` (IPv4 and IPv6), as getaddrinfo gives them (the pod's resolv.conf). @param {string} host */
const lookupAll = async (host) => (await dns.lookup(host, { all: true })).map((entry) => entry.address);

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { 'pid-file': { type: 'string' }, every: { type: 'string' } },
  });
  const nodes = positionals.flatMap((list) => list.split(',')).filter(Boolean);
  const everyMs = Number(values.every) * 1000;
  const pidFile = values['pid-file'];
  if (!pidFile || !(everyMs > 0) || !nodes.length) {
    process.stderr.write('usage: follow-nodes.js --pid-file <nginx.pid> --every <seconds> <host:port>[,…]\n');
    process.exit(2);
  }
  const say = (/** @type {Record<string, unknown>} */ line) =>
    process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), ...line })}\n`);
  followNodes({
    nodes,
    everyMs,
    lookup: lookupAll,
    reload: (from, to) => {
      let pid = 0;
      try {
        pid = Number(fs.readFileSync(pidFile, 'utf8').trim());
        // (an empty file, nginx writing it: 0 would signal this process's own group)
        if (!(pid > 0)) throw new Error(`no pid in ${pidFile}`);
        process.kill(pid, 'SIGHUP');
      } catch (err) {
        // nginx not running yet (or restarting): it resolves the names itself when it starts
        return say({ msg: 'varnish node addresses', to, nginx: `not told: ${/** @type {Error} */ (err).message}` });
      }
      say({
        msg: from ? 'varnish node addresses changed: nginx reloads' : 'varnish node addresses: nginx reloads',
        from,
        to,
        pid,
      });
    },
  });
}
