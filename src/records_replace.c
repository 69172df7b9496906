/*
 * records_replace.c — upserts that replace (chroma_upsert and chroma_upsert_query with
 * replace => true): documents and metadata become exactly what was sent.
 *
 * Chroma's upsert merges metadata and keeps the stored document when the new one is
 * null. The mirrors' rules make it exact, and are reused here: a key the new metadata
 * lacks is sent as null (chroma_metadata_append_nulls), and a record whose document is
 * NULL is deleted before it is upserted. Where a mirror knows every key it has sent, a
 * replacing upsert reads the keys of the stored records first (get by ids). Neither
 * step is atomic with the upsert: README says what a concurrent reader or writer sees.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "encode.h"
#include "get_pages.h"
#include "metadata.h"
#include "pgbuf.h"
#include "records.h"

static int
cmp_names(const void *a, const void *b, void *arg)
{
	char	  **names = (char **) arg;

	return strcmp(names[*(const int *) a], names[*(const int *) b]);
}

/* Index of the record whose id (server encoding) is id, or -1; order sorts rs by name. */
static int
find_record(const RecordSet *rs, const int *order, int n, const char *id)
{
	int			lo = 0;
	int			hi = n - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;
		int			c = strcmp(rs->names[order[mid]], id);

		if (c == 0)
			return order[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* rs's metadata of record i plus every key of stored (a metadata text) it lacks, as null. */
static void
add_stored_keys(RecordSet *rs, int i, const char *stored, List *new_keys)
{
	Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(stored)));
	List	   *stored_keys = chroma_metadata_keys(jb);
	char	  **keys = palloc_array(char *, Max(list_length(stored_keys), 1));
	int			n = 0;
	ListCell   *lc;
	cs_buf		out;
	cs_record  *r = &rs->recs[i];

	foreach(lc, stored_keys)
		keys[n++] = (char *) lfirst(lc);
	pgbuf_init(&out, (r->metadata ? r->metadata_len : 2) + 64);
	if (r->metadata)
		cs_buf_append(&out, r->metadata, r->metadata_len);
	else
		cs_buf_puts(&out, "{}");
	if (chroma_metadata_append_nulls(&out, keys, n, new_keys) == 0)
		return;
	r->metadata = pgbuf_cstring(&out);
	r->metadata_len = out.len;
}

/* Adds the stored keys of the records keep[0..n) lack (one get by their ids, paged). */
static void
read_stored_keys(RecordSet *rs, const char *collection_id, const int *keep, int n,
				 const int *order, int nkeep, List **new_keys)
{
	cs_buf		fields;
	GetPager	pager;
	ChromaRows	rows;

	pgbuf_init(&fields, 256);
	cs_buf_puts(&fields, "\"include\":[\"metadatas\"],\"ids\":[");
	for (int k = 0; k < n; k++)
	{
		if (k > 0)
			cs_buf_putc(&fields, ',');
		cs_json_string(&fields, rs->recs[keep[k]].id, rs->recs[keep[k]].id_len);
	}
	cs_buf_putc(&fields, ']');
	get_pager_init(&pager, collection_id, pgbuf_cstring(&fields), 0, -1,
				   "read the metadata of the records to replace");
	while (get_pager_next(&pager, &rows))
	{
		for (int j = 0; j < rows.n; j++)
		{
			int			i;

			if (!rows.has_metadatas || rows.metadatas[j] == NULL)
				continue;
			i = find_record(rs, order, nkeep, rows.ids[j]);
			if (i >= 0)
				add_stored_keys(rs, i, rows.metadatas[j], new_keys[i]);
		}
	}
}

void
record_set_replace(RecordSet *rs, const char *collection_id, RecordSet *clear)
{
	int		   *keep = palloc_array(int, Max(rs->n, 1));
	int		   *order;
	int			nkeep = 0;
	List	  **new_keys;

	record_set_init(clear, rs->n);
	for (int i = 0; i < rs->n; i++)
	{
		if (rs->recs[i].document == NULL)
		{
			/* cleared by delete + upsert: it comes back with exactly the new metadata */
			clear->recs[clear->n] = rs->recs[i];
			clear->names[clear->n] = rs->names[i];
			clear->positions[clear->n] = rs->positions[i];
			clear->n++;
		}
		else
			keep[nkeep++] = i;
	}
	/* a document NULL (or no documents at all) is sent as null, never omitted */
	rs->with_documents = true;
	if (nkeep == 0)
		return;
	rs->with_metadatas = true;

	new_keys = palloc0_array(List *, rs->n);
	for (int k = 0; k < nkeep; k++)
	{
		cs_record  *r = &rs->recs[keep[k]];

		if (r->metadata != NULL)
		{
			char	   *txt = pg_any_to_server(r->metadata, (int) r->metadata_len, PG_UTF8);

			new_keys[keep[k]] = chroma_metadata_keys(DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																						CStringGetDatum(txt))));
		}
	}
	order = palloc_array(int, nkeep);
	for (int k = 0; k < nkeep; k++)
		order[k] = keep[k];
	qsort_arg(order, nkeep, sizeof(int), cmp_names, rs->names);
	/* ids in chunks: every page of a get sends its ids again */
	for (int k = 0; k < nkeep; k += GET_PAGE_MAX_RECORDS)
		read_stored_keys(rs, collection_id, keep + k, Min(GET_PAGE_MAX_RECORDS, nkeep - k),
						 order, nkeep, new_keys);
}

void
record_sender_send_replacing(RecordSender *sender, RecordSender *deleter, RecordSet *rs,
							 RecordSet *clear)
{
	/* nothing is deleted unless the upsert that follows can be sent */
	record_sender_check(sender, rs);
	if (clear->n > 0)
	{
		record_sender_send(deleter, clear);
		record_sender_wait(deleter);
	}
	record_sender_send(sender, rs);
}
