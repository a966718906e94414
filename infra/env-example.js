// Prints `.env.example` from the declarations: `npm run env-example`. A test checks it is current.
import { envExample } from '../lib/src/config.js';
import { allSections } from './settings.js';

export async function renderEnvExample() {
  const seen = new Set();
  let text = '# Every setting of the stack, with its default. Copy to .env and change what you need.\n'
    + '# Generated from the declarations in infra/settings.js and */src/config.js: npm run env-example\n\n';
  for (const [title, settings] of await allSections()) {
    const fresh = settings.filter((setting) => !seen.has(setting.name));
    fresh.forEach((setting) => seen.add(setting.name));
    text += envExample(title, fresh) + '\n';
  }
  return text;
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(await renderEnvExample());
