export * from './dsl.js';
export { nodeTypes, defineNodeType, type NodeTypeDef } from './nodes/index.js';
export * from './chain-cache.js';
export * from './template.js';
export * from './workspace-path.js';
export * from './skills/markdown.js';
export * from './skills/archive.js';
export { readZipDirectory, unsafeEntryName, type ZipEntryInfo } from './skills/zip.js';
export * from './models/index.js';
