// infra/docker/follow-address.sh, the follower of nginx's and varnish's next hops (compose, the chart's nginx):
// run for real, with a `getent` of this test's own on PATH answering from a file, so names can move, vanish
// and come back.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../resolve.js';
import { waitFor } from '../../test/support/ports.js';

const script = path.join(ROOT, 'infra/docker/follow-address.sh');
const settle = () => new Promise((resolve) => setTimeout(resolve, 600));

/**
 * The pids whose command line names `text`, from /proc (a fresh machine may have no pgrep).
 * @param {string} text
 */
function processesNaming(text) {
  return fs
    .readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text);
      } catch {
        return false;
      }
    })
    .join(' ');
}

/**
 * A directory with a hosts file, a `getent ahosts` answering from it, and a reload command that appends to a
 * log (and fails while a "fail" file exists); `follow(args)` starts the follower with them, `followProgram`
 * with a program.
 * @param {import('node:test').TestContext} t
 */
function scene(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'follow-address-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const hosts = path.join(dir, 'hosts');
  const log = path.join(dir, 'reloads');
  // getent ahosts NAME: the lines of the hosts file naming it, as "ADDRESS STREAM NAME" (getent's shape)
  fs.writeFileSync(
    path.join(dir, 'getent'),
    `#!/bin/sh\nawk -v name="$2" '$1 == name { print $2 "  STREAM " name }' "${hosts}"\n`,
    { mode: 0o755 },
  );
  const command = `[ ! -e ${dir}/fail ] && echo reloaded >> ${log}`;
  const state = { said: '' };
  /** @param {string[]} args what follows SECONDS COMMAND */
  const follow = (args) => {
    const follower = spawn(script, ['0.1', command, ...args], {
      env: { ...process.env, PATH: `${dir}:${process.env.PATH}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.after(() => follower.kill());
    follower.stderr.on('data', (chunk) => (state.said += chunk));
    return follower;
  };
  return {
    dir,
    state,
    /** @param {string} text */
    setHosts: (text) => fs.writeFileSync(hosts, text),
    /** @param {boolean} on */
    failing: (on) => (on ? fs.writeFileSync(path.join(dir, 'fail'), '') : fs.rmSync(path.join(dir, 'fail'))),
    reloads: () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0),
    follow,
    /**
     * The follower with `-- PROGRAM` (a shell that writes its pid, then becomes `sleep 30`), once the program
     * runs; asserts the follower became it (exec). @param {string[]} nodes
     */
    followProgram: async (nodes) => {
      const pidFile = path.join(dir, 'program.pid');
      const program = follow([...nodes, '--', 'sh', '-c', `echo $$ > ${pidFile}; exec sleep 30`]);
      await waitFor(
        async () => fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').endsWith('\n'),
        5000,
        'the program',
      );
      assert.equal(Number(fs.readFileSync(pidFile, 'utf8')), program.pid, 'the follower became the program (exec)');
      return program;
    },
  };
}

test('follow-address.sh: a reload when an address changes, none while nothing moves or a name does not resolve, again after one failed', async (t) => {
  const { state, setHosts, failing, reloads, follow } = scene(t);
  setHosts('varnish 10.0.0.5\nhaproxy 10.0.0.6\n');
  // nodes as EDGE_VARNISH_NODES gives them (name:port, comma separated) and as compose does (names)
  follow(['varnish:6081,haproxy']);
  await settle();
  // the first look is what the program resolved too: a reload would only close its kept-alive connections
  assert.equal(reloads(), 0, 'nothing while nothing moves');

  setHosts('varnish 10.0.0.7\nhaproxy 10.0.0.6\n');
  // what the follower said comes through a pipe, read on a later turn than the reload's line in its file
  await waitFor(async () => reloads() === 1 && state.said.includes('(was'), 5000, 'a reload for the new address');
  assert.match(state.said, /varnish=10\.0\.0\.7 ;haproxy=10\.0\.0\.6 ; \(was varnish=10\.0\.0\.5 ;/);

  // haproxy gone (between a container's removal and its successor): the program would refuse its config
  setHosts('varnish 10.0.0.7\n');
  await settle();
  assert.equal(reloads(), 1, 'no reload while a name does not resolve');
  setHosts('varnish 10.0.0.7\nhaproxy 10.0.0.6\n');
  await settle();
  assert.equal(reloads(), 1, 'back where it was: nothing to do');

  // a failed reload is tried again at the next look, until it works
  failing(true);
  setHosts('varnish 10.0.0.7\nhaproxy 10.0.0.8\n');
  await waitFor(async () => /failed; again at the next look/.test(state.said), 5000, 'the failure said');
  failing(false);
  await waitFor(async () => reloads() === 2, 5000, 'the reload tried again');
  await settle();
  assert.equal(reloads(), 2, 'once it worked, not again');
});

test('follow-address.sh -- PROGRAM: becomes the program, looked before it started; a name first unresolved is a reload once it resolves', async (t) => {
  const { dir, state, setHosts, reloads, followProgram } = scene(t);
  // varnish-0 being replaced as the program starts: the program could not resolve it either
  setHosts('haproxy 10.0.0.6\n');
  const program = await followProgram(['varnish-0:6081', 'haproxy']);
  await settle();
  assert.equal(reloads(), 0, 'nothing while varnish-0 does not resolve');
  setHosts('varnish-0 10.0.0.9\nhaproxy 10.0.0.6\n');
  await waitFor(async () => reloads() === 1 && state.said.includes('(was'), 5000, 'a reload once it resolves');
  assert.match(state.said, /\(was not resolved\)/);
  await settle();
  assert.equal(reloads(), 1);
  // the follower beside it (its command line names this test's directory) ends with the program
  const followers = () => processesNaming(dir);
  assert.notEqual(followers(), '', 'the follower runs beside the program');
  program.kill();
  await waitFor(async () => followers() === '', 5000, 'the follower ending with the program');
});

test('follow-address.sh -- PROGRAM with no names to follow: the program alone, no follower beside it', async (t) => {
  const { dir, followProgram } = scene(t);
  await followProgram(['']);
  // the program is `sleep 30` now: whatever names this test's directory is a follower
  assert.equal(processesNaming(dir), '');
});
