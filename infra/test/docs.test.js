// The manual holds together: README.md is a newcomer's first hour (under 20 KB) and every link in it and in
// docs/ reaches a file of the repository and, with an anchor, a heading of that file.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../resolve.js';

/** GitHub's anchor of a heading. @param {string} heading */
const slug = (heading) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');

/** @param {string} file */
function anchorsOf(file) {
  const text = fs.readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.*)$/gm)].map((match) => slug(match[1])));
}

const pages = [
  'README.md',
  'SECURITY.md',
  ...fs
    .readdirSync(path.join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

test('README.md is the first hour, not the whole manual: under 20 KB, no line past 300 characters', () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  assert.ok(readme.length < 20 * 1024, `${readme.length} bytes`);
  const long = readme.split('\n').filter((line) => line.length > 300 && !line.startsWith('|'));
  assert.deepEqual(long, []);
});

test('every link in README.md and docs/ resolves: the file exists, the anchor is a heading of it', () => {
  const broken = [];
  for (const page of pages) {
    const text = fs.readFileSync(path.join(ROOT, page), 'utf8').replace(/```[\s\S]*?```/g, '');
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^(https?:|mailto:)/.test(target)) continue;
      const [file, anchor] = target.split('#');
      const resolved = file ? path.resolve(path.dirname(path.join(ROOT, page)), file) : path.join(ROOT, page);
      if (!fs.existsSync(resolved)) broken.push(`${page}: ${target} (no such file)`);
      else if (anchor && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor))
        broken.push(`${page}: ${target} (no such heading)`);
    }
  }
  assert.deepEqual(broken, []);
});

test('every alert has a description and a runbook: a section of docs/runbooks.md named after it', () => {
  const alerts = fs.readFileSync(path.join(ROOT, 'monitoring/rules/alerts.yml'), 'utf8');
  const rules = alerts.split(/^      - alert: /m).slice(1);
  assert.ok(rules.length >= 10, `${rules.length} alerts`);
  const sections = anchorsOf(path.join(ROOT, 'docs/runbooks.md'));
  const missing = [];
  for (const rule of rules) {
    const name = rule.split('\n')[0].trim();
    if (!/^ {10}description: "\S/m.test(rule)) missing.push(`${name}: no description`);
    const runbook = /^ {10}runbook_url: "docs\/runbooks\.md#([\w-]+)"$/m.exec(rule);
    if (!runbook) missing.push(`${name}: no runbook_url`);
    else if (runbook[1] !== slug(name) || !sections.has(runbook[1]))
      missing.push(`${name}: no section ${runbook[1]} in docs/runbooks.md`);
  }
  assert.deepEqual(missing, []);
});
