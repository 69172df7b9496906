/*
 * ownership.c — which mirror owns a collection, recorded in the collection's metadata.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "ownership.h"

char *
ownership_tag(const char *system_identifier, Oid dboid, Oid relid)
{
	return psprintf("%s/%u/%u", system_identifier, dboid, relid);
}

char *
ownership_of(const ChromaCollection *coll)
{
	if (coll->metadata == NULL)
		return NULL;
	return chroma_jsonb_text(chroma_jsonb_get(coll->metadata, CHROMA_OWNER_KEY));
}

void
ownership_claim(const ChromaCollection *coll, const char *tag, bool adopt)
{
	char	   *owner = ownership_of(coll);
	Jsonb	   *mine;
	Jsonb	   *merged;

	if (owner != NULL && strcmp(owner, tag) == 0)
		return;
	if (owner != NULL && !adopt)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("Chroma collection \"%s\" is already mirrored by another table or database",
						coll->name ? coll->name : coll->id),
				 errdetail("Its metadata names owner \"%s\" (system identifier/database/table).", owner),
				 errhint("Use another collection, or pass adopt => true to take it over (the other mirror then pauses).")));
	mine = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
											  CStringGetDatum(psprintf("{\"%s\": \"%s\"}",
																	   CHROMA_OWNER_KEY, tag))));
	merged = coll->metadata
		? DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(coll->metadata),
											 JsonbPGetDatum(mine)))
		: mine;
	chroma_api_set_collection_metadata(coll->id, merged);
}
