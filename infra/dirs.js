// Directories the stack creates, each with the mode it needs, whatever the umask. A recursive mkdir with a
// mode gives that mode to every parent it creates too: the secrets directory (0700) once made
// /var/lib/image-cdn-stack 0700, and no stack user could reach anything below it (#42).
import fs from 'node:fs';
import path from 'node:path';

/**
 * Makes `dir` with `mode`; each missing parent on the way gets `parentMode` (searchable by the stack's
 * users). Existing parents are left as they are, and so is one another process makes at the same moment.
 * Returns `dir`.
 * @param {string} dir @param {number} mode @param {number} [parentMode]
 */
export function makeDir(dir, mode, parentMode = 0o755) {
  const target = path.resolve(dir);
  const missing = [];
  for (let at = target; !fs.existsSync(at); at = path.dirname(at)) missing.unshift(at);
  for (const at of missing) {
    try {
      fs.mkdirSync(at, { mode: at === target ? mode : parentMode });
    } catch (err) {
      // made at the same moment by another render (the stacks of one checkout rendered together): theirs
      if (/** @type {NodeJS.ErrnoException} */ (err).code === 'EEXIST' && fs.statSync(at).isDirectory()) continue;
      throw err;
    }
    fs.chmodSync(at, at === target ? mode : parentMode);
  }
  return target;
}

/**
 * The shared run root (/var/lib/image-cdn-stack): made 0755, or set back to 0755 when an older version left
 * it unsearchable by the stack's users; says so on stderr.
 * @param {string} root
 */
export function repairSharedRoot(root) {
  if (!fs.existsSync(root)) {
    makeDir(root, 0o755);
    return;
  }
  const mode = fs.statSync(root).mode & 0o777;
  if ((mode & 0o555) === 0o555) return;
  fs.chmodSync(root, 0o755);
  process.stderr.write(
    `${root} was ${mode.toString(8).padStart(4, '0')} (the stack's users could not reach their files): set to 0755\n`,
  );
}
