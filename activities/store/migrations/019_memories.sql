-- Agent memory (issue 19): facts a user stated, kept per tenant and user, with where
-- they came from. Search uses pgvector where the database has it, full-text search
-- (the `tsv` column, always there) where it does not, so this file runs on both.

-- pgvector only where it is installed and this role may create it; without it the
-- memory store searches `tsv` instead.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS vector;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'pgvector is available but this role may not create it; '
                'memories use full-text search';
        END;
    END IF;
END
$$;

CREATE TABLE IF NOT EXISTS memories (
    tenant_id         text NOT NULL,
    id                text NOT NULL,
    user_id           text NOT NULL,
    fact              text NOT NULL,
    kind              text NOT NULL,
    topic             text NOT NULL DEFAULT '',
    -- SHA-256 of the normalised fact: the same fact is stored once per user.
    fact_hash         text NOT NULL,
    source_run_id     text NOT NULL,
    source_session_id text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    embedding_model   text,
    tsv               tsvector GENERATED ALWAYS AS (to_tsvector('english', fact)) STORED,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, user_id, fact_hash)
);
CREATE INDEX IF NOT EXISTS memories_owner ON memories (tenant_id, user_id, updated_at DESC);
CREATE INDEX IF NOT EXISTS memories_tsv ON memories USING gin (tsv);

-- The embedding, where pgvector is: without a fixed dimension, so any embeddings model
-- fits (searches compare only vectors of the same `embedding_model`).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        ALTER TABLE memories ADD COLUMN IF NOT EXISTS embedding vector;
    END IF;
END
$$;

-- One row per run whose facts were extracted: a retried extraction answers from it
-- instead of asking the model again.
CREATE TABLE IF NOT EXISTS memory_extractions (
    run_id      text PRIMARY KEY,
    tenant_id   text NOT NULL,
    user_id     text NOT NULL,
    proposed    integer NOT NULL,
    stored      integer NOT NULL,
    updated     integer NOT NULL,
    withheld    integer NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
