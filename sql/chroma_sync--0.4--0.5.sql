-- chroma_sync 0.4 -> 0.5: hardening (see README "Upgrading")
\echo Use "ALTER EXTENSION chroma_sync UPDATE TO '0.5'" to load this file. \quit
