import { dataTypeOf, parseMsgData } from '../chain/message.js';
import type { RuleMsg } from '../chain/types.js';
import { fieldFilterSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/** Comma-separated names, blanks dropped (RuleGo's filterEmptyStrings). */
function names(list: string | undefined): string[] {
  return (list ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
}

/**
 * RuleGo's `fieldFilter`: `True` when the named fields are present, `False` otherwise. With
 * `checkAllKeys` every name of `metadataNames` must be a metadata key and every name of
 * `dataNames` a key of the data (a JSON object); without it one of either is enough. As in
 * RuleGo, text data has no fields, and JSON data that is not an object goes along `Failure`.
 */
export const fieldFilter = defineNodeType({
  ...fieldFilterSpec,
  async execute(msg, config) {
    const data = dataFields(msg);
    const inMetadata = (k: string) => Object.hasOwn(msg.metadata, k);
    const inData = (k: string) => data !== undefined && Object.hasOwn(data, k);
    const meta = names(config.metadataNames);
    const keys = names(config.dataNames);
    const pass = config.checkAllKeys ? meta.every(inMetadata) && keys.every(inData) : meta.some(inMetadata) || keys.some(inData);
    return { msg, relation: pass ? 'True' : 'False' };
  },
});

/**
 * The data as an object whose keys are its fields; undefined for text (data that does not parse
 * as JSON is text here, as `dataType` says). JSON that is not an object is a throw, as RuleGo's
 * decoding into a map fails on it.
 */
function dataFields(msg: RuleMsg): Record<string, unknown> | undefined {
  if (dataTypeOf(msg) !== 'JSON') return undefined;
  const value = parseMsgData(msg.data);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('the data is JSON but not an object, so it has no fields');
  return value as Record<string, unknown>;
}
