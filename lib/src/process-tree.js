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
