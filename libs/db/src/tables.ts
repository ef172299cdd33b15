import type { ColumnType } from 'kysely';

/**
 * Row shapes as the database sees them, kept apart from the API types (kysely's recommended
 * style). A later issue adds a table by adding its interface here and one line to `Database`.
 */
export interface Database {
  settings: SettingsTable;
}

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * JSON columns are written as JSON text: pg would turn a top-level JS array into a Postgres
 * array literal, so serialising ourselves is what makes both drivers store the same value.
 */
export type JsonColumn<T extends JsonValue = JsonValue> = ColumnType<T, string, string>;

/** A timestamptz with a `now()` default: optional on insert, always a Date on read. */
export type TimestampDefaultNow = ColumnType<Date, Date | string | undefined, Date | string>;

export interface SettingsTable {
  key: string;
  value: JsonColumn;
  updated_at: TimestampDefaultNow;
}
