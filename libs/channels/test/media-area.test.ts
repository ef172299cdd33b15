import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { readMediaFile, resolveMediaFile } from '../src/media-area.js';

it('reads a file of the media area, and refuses it once it became a link leading out or grew past the bound', async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-media-'));
  const media = path.join(root, 'media');
  fs.mkdirSync(path.join(media, 'img'), { recursive: true });
  fs.writeFileSync(path.join(media, 'img', 'a.png'), 'png bytes');
  fs.writeFileSync(path.join(root, 'outside.txt'), 'host secret');
  fs.symlinkSync(path.join(media, 'img', 'a.png'), path.join(media, 'inside-link.png'));

  expect(Buffer.from(await readMediaFile(media, 'img/a.png')).toString()).toBe('png bytes');
  expect(Buffer.from(await readMediaFile(media, './img//a.png')).toString()).toBe('png bytes');
  // A link that stays inside the area is fine.
  expect(Buffer.from(await readMediaFile(media, 'inside-link.png')).toString()).toBe('png bytes');
  await expect(readMediaFile(media, 'img/a.png', 4)).rejects.toThrow(/more than/);

  fs.rmSync(path.join(media, 'img', 'a.png'));
  fs.symlinkSync(path.join(root, 'outside.txt'), path.join(media, 'img', 'a.png'));
  await expect(readMediaFile(media, 'img/a.png')).rejects.toThrow(/link leading out of the media area/);
  await expect(resolveMediaFile(path.join(root, 'none'), 'a.png', 'imagePath')).rejects.toThrow(/no media\/ folder/);
  fs.rmSync(root, { recursive: true, force: true });
});
