// docs/architecture.md follows requests through the code by name: every file and function it names must exist,
// or the walk leads a newcomer nowhere (#52: it had drifted).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../resolve.js';

const tracked = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' }).trim().split('\n');
const code = tracked
  .filter((file) => file.endsWith('.js') && !file.includes('/test/') && !file.startsWith('test/'))
  .map((file) => fs.readFileSync(path.join(ROOT, file), 'utf8'))
  .join('\n');
const templates = tracked
  .filter((file) => /\.(template|vcl|lua|cfg)$/.test(file))
  .map((file) => fs.readFileSync(path.join(ROOT, file), 'utf8'))
  .join('\n');

/** The names a page puts in backticks. @param {string} page */
const named = (page) => [
  ...new Set([...fs.readFileSync(path.join(ROOT, page), 'utf8').matchAll(/`([^`\n]+)`/g)].map((match) => match[1])),
];

test('docs/architecture.md: every file, directory and function it names is in the repository', () => {
  const missing = [];
  for (const name of named('docs/architecture.md')) {
    const bare = name.replace(/\(\)$/, '');
    if (/^[\w.-]+(\/[\w.-]+)*\/?$/.test(bare) && bare.includes('/') && /^[\w-]+\//.test(bare)) {
      // a path from the repository's root (a directory ends with /)
      const under = bare.endsWith('/') ? bare : `${bare}/`;
      // from the root, or from a directory the sentence is in (targets/varnish.js of the purge service)
      if (
        tracked.some(
          (file) => file === bare || file.endsWith(`/${bare}`) || file.startsWith(under) || file.includes(`/${under}`),
        )
      )
        continue;
      // or below one of its files' directories (run/ paths are made at run time)
      if (/^(run|logs|conf|data|secrets)\//.test(bare)) continue;
      missing.push(name);
    } else if (/^[\w-]+\.(js|vcl|lua|template|yml|json|mtail)$/.test(bare)) {
      // a file named alone: somewhere in the repository
      // (a rendered file by its template: sizes.vcl from sizes.vcl.template)
      if (!tracked.some((file) => [bare, `${bare}.template`].includes(path.basename(file)))) missing.push(name);
    } else if (/^[a-z]+[A-Z]\w*$/.test(bare)) {
      // a function or constant in camelCase: defined somewhere in the code
      if (
        !new RegExp(`(function\\*?\\s+${bare}\\b|\\b${bare}\\s*[=:(]|\\b${bare},|export \\{[^}]*\\b${bare}\\b)`).test(
          code,
        )
      )
        missing.push(name);
    } else if (/^[A-Z][A-Z0-9_]+$/.test(bare)) {
      // a setting or a constant: declared in the code or a template
      if (!new RegExp(`\\b${bare}\\b`).test(code + templates)) missing.push(name);
    }
  }
  assert.deepEqual(missing, []);
});

/**
 * The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens, a repeated
 * heading numbered. @param {string} page
 */
function anchorsOf(page) {
  const anchors = new Set();
  /** @type {Map<string, number>} */
  const seen = new Map();
  let fenced = false;
  for (const line of fs.readFileSync(page, 'utf8').split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = !fenced && line.match(/^#{1,6}\s+(.*)$/);
    if (!heading) continue;
    const anchor = heading[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .trim()
      .replace(/\s/g, '-');
    const times = seen.get(anchor) ?? 0;
    seen.set(anchor, times + 1);
    anchors.add(times ? `${anchor}-${times}` : anchor);
  }
  return anchors;
}

test('every link between the Markdown pages leads to a file, and to a heading where it names one', () => {
  const broken = [];
  for (const page of tracked.filter((file) => file.endsWith('.md'))) {
    for (const [, target] of fs.readFileSync(path.join(ROOT, page), 'utf8').matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;
      const [file, anchor] = target.split('#');
      const linked = file ? path.join(ROOT, path.dirname(page), decodeURIComponent(file)) : path.join(ROOT, page);
      if (!fs.existsSync(linked)) broken.push(`${page}: ${target}`);
      else if (anchor && linked.endsWith('.md') && !anchorsOf(linked).has(anchor)) broken.push(`${page}: ${target}`);
    }
  }
  assert.deepEqual(broken, []);
});
