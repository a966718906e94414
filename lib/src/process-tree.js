// A process's children and descendants, read from /proc (each task's `children` file: no scan of every
// process). Used by the socket holder (its service), the tests (the programs below supervisord) and the
// benchmarks (the origin with its transform workers).
import fs from 'node:fs';

/**
 * The children of `pid`, of all its threads (a child started from another thread is listed under that
 * thread); none when it is gone. @param {number} pid @returns {number[]}
 */
export function childPids(pid) {
  let tasks = [];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return []; // gone
  }
  const children = new Set();
  for (const task of tasks) {
    try {
      for (const child of fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ')) {
        if (child.trim()) children.add(Number(child));
      }
    } catch {
      // the thread ended meanwhile
    }
  }
  return [...children];
}

/** `pid` and every process below it, children of children included. @param {number} pid @returns {number[]} */
export function processTree(pid) {
  return [pid, ...childPids(pid).flatMap((child) => processTree(child))];
}

/** Whether a process runs with this pid (another user's too: signalling it is refused, not unknown). @param {number} pid */
export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return /** @type {NodeJS.ErrnoException} */ (err).code === 'EPERM';
  }
}

/**
 * The one of `pids` started last (by its start time in /proc; one gone meanwhile is left out), or undefined.
 * @param {number[]} pids @returns {number | undefined}
 */
export function newest(pids) {
  let found;
  let latest = -1;
  for (const pid of pids) {
    const started = startTicks(pid);
    if (started < 0) continue;
    // (two started within one tick: the higher pid, the later one but after a wrap)
    if (started > latest || (started === latest && pid > (found ?? 0))) [found, latest] = [pid, started];
  }
  return found;
}

/** A process's start time in clock ticks since boot (field 22 of its stat); -1 once it is gone. @param {number} pid */
export function startTicks(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the fields after the command's name, which is in parentheses and may hold spaces
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  } catch {
    return -1;
  }
}
