/*
 * mirror_filter_depend.c — a bound filter's dependencies, recorded in pg_depend like a
 * CHECK constraint's: the mirror's row trigger (chroma_sync_<id>) depends on every
 * function, operator, type and collation the stored tree refers to. DROP FUNCTION of a
 * function the filter calls then fails (2BP01, naming the trigger) instead of leaving a
 * tree that refers to nothing; DROP ... CASCADE drops the trigger, and the worker pauses
 * the mirror with that reason (mirror_check.c).
 *
 * The table's own columns are left out on purpose: dropping or retyping a column the filter
 * reads pauses the mirror with the reason (mirror_columns.c), as for any mirrored column.
 * A field of a composite type the filter reads, and the object a reg* constant names
 * ('public.myconf'::regconfig), are dependencies too, as for a CHECK constraint.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_ts_config.h"
#include "catalog/pg_ts_dict.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "nodes/nodeFuncs.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "mirror_config.h"

typedef struct Refs
{
	ObjectAddress *refs;
	int			n;
	int			size;
} Refs;

static void
add_sub(Refs *addrs, Oid classid, Oid objid, int32 subid)
{
	if (!OidIsValid(objid))
		return;
	for (int i = 0; i < addrs->n; i++)
		if (addrs->refs[i].classId == classid && addrs->refs[i].objectId == objid &&
			addrs->refs[i].objectSubId == subid)
			return;
	if (addrs->n == addrs->size)
	{
		addrs->size = addrs->size == 0 ? 16 : addrs->size * 2;
		addrs->refs = addrs->refs == NULL ? palloc_array(ObjectAddress, addrs->size)
			: repalloc_array(addrs->refs, ObjectAddress, addrs->size);
	}
	ObjectAddressSubSet(addrs->refs[addrs->n], classid, objid, subid);
	addrs->n++;
}

static void
add(Refs *addrs, Oid classid, Oid objid)
{
	add_sub(addrs, classid, objid, 0);
}

/*
 * The object a reg* constant names ('public.myconf'::regconfig), as find_expr_references
 * records it for a CHECK constraint; only when it exists (a constant may name nothing).
 */
static void
add_reg_constant(Refs *addrs, Const *c)
{
	Oid			id;

	if (c->constisnull)
		return;
	id = DatumGetObjectId(c->constvalue);
	switch (c->consttype)
	{
		case REGPROCOID:
		case REGPROCEDUREOID:
			if (SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(id)))
				add(addrs, ProcedureRelationId, id);
			break;
		case REGOPEROID:
		case REGOPERATOROID:
			if (SearchSysCacheExists1(OPEROID, ObjectIdGetDatum(id)))
				add(addrs, OperatorRelationId, id);
			break;
		case REGCLASSOID:
			if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(id)))
				add(addrs, RelationRelationId, id);
			break;
		case REGTYPEOID:
			if (SearchSysCacheExists1(TYPEOID, ObjectIdGetDatum(id)))
				add(addrs, TypeRelationId, id);
			break;
		case REGCOLLATIONOID:
			if (SearchSysCacheExists1(COLLOID, ObjectIdGetDatum(id)))
				add(addrs, CollationRelationId, id);
			break;
		case REGCONFIGOID:
			if (SearchSysCacheExists1(TSCONFIGOID, ObjectIdGetDatum(id)))
				add(addrs, TSConfigRelationId, id);
			break;
		case REGDICTIONARYOID:
			if (SearchSysCacheExists1(TSDICTOID, ObjectIdGetDatum(id)))
				add(addrs, TSDictionaryRelationId, id);
			break;
		case REGNAMESPACEOID:
			if (SearchSysCacheExists1(NAMESPACEOID, ObjectIdGetDatum(id)))
				add(addrs, NamespaceRelationId, id);
			break;
		default:
			break;
	}
}

static void
add_type(Refs *addrs, Oid type)
{
	add(addrs, TypeRelationId, type);
}

/* A collation a node names, which may appear nowhere else in the tree (not the default). */
static void
add_collation(Refs *addrs, Oid coll)
{
	if (coll != DEFAULT_COLLATION_OID)
		add(addrs, CollationRelationId, coll);
}

/* What the tree refers to, but its columns (Vars). */
static bool
refs_walker(Node *node, Refs *addrs)
{
	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_FuncExpr:
			add(addrs, ProcedureRelationId, ((FuncExpr *) node)->funcid);
			add_type(addrs, ((FuncExpr *) node)->funcresulttype);
			break;
		case T_OpExpr:
		case T_DistinctExpr:
		case T_NullIfExpr:
			{
				OpExpr	   *op = (OpExpr *) node;

				set_opfuncid(op);
				add(addrs, OperatorRelationId, op->opno);
				add(addrs, ProcedureRelationId, op->opfuncid);
				add_type(addrs, op->opresulttype);
				break;
			}
		case T_ScalarArrayOpExpr:
			{
				ScalarArrayOpExpr *op = (ScalarArrayOpExpr *) node;

				set_sa_opfuncid(op);
				add(addrs, OperatorRelationId, op->opno);
				add(addrs, ProcedureRelationId, op->opfuncid);
				break;
			}
		case T_RowCompareExpr:
			{
				RowCompareExpr *r = (RowCompareExpr *) node;
				ListCell   *lc;

				foreach(lc, r->opnos)
					add(addrs, OperatorRelationId, lfirst_oid(lc));
				foreach(lc, r->opfamilies)
					add(addrs, OperatorFamilyRelationId, lfirst_oid(lc));
				break;
			}
		case T_CoerceViaIO:
			add_type(addrs, ((CoerceViaIO *) node)->resulttype);
			add_collation(addrs, ((CoerceViaIO *) node)->resultcollid);
			break;
		case T_ArrayCoerceExpr:
			add_type(addrs, ((ArrayCoerceExpr *) node)->resulttype);
			add_collation(addrs, ((ArrayCoerceExpr *) node)->resultcollid);
			break;
		case T_RelabelType:
			add_type(addrs, ((RelabelType *) node)->resulttype);
			add_collation(addrs, ((RelabelType *) node)->resultcollid);
			break;
		case T_ConvertRowtypeExpr:
			add_type(addrs, ((ConvertRowtypeExpr *) node)->resulttype);
			break;
		case T_CoerceToDomain:
			add_type(addrs, ((CoerceToDomain *) node)->resulttype);
			break;
		case T_RowExpr:
			/* ROW(...)::a_composite: the type appears nowhere else in the tree (TAP 114) */
			add_type(addrs, ((RowExpr *) node)->row_typeid);
			break;
		case T_ArrayExpr:
			add_type(addrs, ((ArrayExpr *) node)->array_typeid);
			break;
		case T_SubscriptingRef:
			add_type(addrs, ((SubscriptingRef *) node)->refcontainertype);
			add_type(addrs, ((SubscriptingRef *) node)->refrestype);
			break;
		case T_Const:
			add_type(addrs, ((Const *) node)->consttype);
			add_collation(addrs, ((Const *) node)->constcollid);
			add_reg_constant(addrs, (Const *) node);
			break;
		case T_FieldSelect:
			{
				/* a field of a composite: its attribute, as for a CHECK constraint (TAP 105) */
				FieldSelect *f = (FieldSelect *) node;
				Oid			rel = get_typ_typrelid(getBaseType(exprType((Node *) f->arg)));

				if (OidIsValid(rel) && f->fieldnum > 0)
					add_sub(addrs, RelationRelationId, rel, f->fieldnum);
				add_type(addrs, f->resulttype);
				add_collation(addrs, f->resultcollid);
				break;
			}
		case T_FieldStore:
			{
				FieldStore *f = (FieldStore *) node;
				Oid			rel = get_typ_typrelid(f->resulttype);
				ListCell   *lc;

				if (OidIsValid(rel))
					foreach(lc, f->fieldnums)
						add_sub(addrs, RelationRelationId, rel, lfirst_int(lc));
				add_type(addrs, f->resulttype);
				break;
			}
		case T_NextValueExpr:
			add(addrs, RelationRelationId, ((NextValueExpr *) node)->seqid);
			break;
		case T_CollateExpr:
			add(addrs, CollationRelationId, ((CollateExpr *) node)->collOid);
			break;
		default:
			break;
	}
	return expression_tree_walker(node, refs_walker, addrs);
}

/* Whether the trigger already depends on the object (chroma_adopt records again). */
static bool
recorded(Oid trigger, const ObjectAddress *ref)
{
	Relation	rel = table_open(DependRelationId, AccessShareLock);
	ScanKeyData key[3];
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found = false;

	ScanKeyInit(&key[0], Anum_pg_depend_classid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(TriggerRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_objid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(trigger));
	ScanKeyInit(&key[2], Anum_pg_depend_objsubid, BTEqualStrategyNumber, F_INT4EQ,
				Int32GetDatum(0));
	scan = systable_beginscan(rel, DependDependerIndexId, true, NULL, 3, key);
	while (!found && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);

		found = d->refclassid == ref->classId && d->refobjid == ref->objectId &&
			d->refobjsubid == ref->objectSubId;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

ObjectAddress *
mirror_filter_objects(const char *node, int *n)
{
	Refs		all = {0};

	(void) refs_walker(stringToNode(node), &all);
	*n = all.n;
	return all.refs;
}

void
mirror_filter_record_depends(Oid relid, int mirror_id, const char *node)
{
	char	   *name = psprintf("chroma_sync_%d", mirror_id);
	Oid			trigger = get_trigger_oid(relid, name, true);
	Refs		all = {0};
	ObjectAddress depender;

	if (node == NULL || !OidIsValid(trigger))
		return;					/* no filter, or the trigger dropped (the mirror pauses) */
	(void) refs_walker(stringToNode(node), &all);
	ObjectAddressSet(depender, TriggerRelationId, trigger);
	for (int i = 0; i < all.n; i++)
		if (!recorded(trigger, &all.refs[i]))
			/* objects pinned by initdb (pg_catalog's) are skipped, as for any dependency */
			recordDependencyOn(&depender, &all.refs[i], DEPENDENCY_NORMAL);
}

bool
mirror_filter_refs_exist(const char *node)
{
	Refs		all = {0};

	(void) refs_walker(stringToNode(node), &all);
	for (int i = 0; i < all.n; i++)
	{
		Oid			id = all.refs[i].objectId;
		bool		exists = true;

		switch (all.refs[i].classId)
		{
			case ProcedureRelationId:
				exists = SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(id));
				break;
			case OperatorRelationId:
				exists = SearchSysCacheExists1(OPEROID, ObjectIdGetDatum(id));
				break;
			case TypeRelationId:
				exists = SearchSysCacheExists1(TYPEOID, ObjectIdGetDatum(id));
				break;
			case CollationRelationId:
				exists = SearchSysCacheExists1(COLLOID, ObjectIdGetDatum(id));
				break;
			case RelationRelationId:
				exists = all.refs[i].objectSubId == 0
					? SearchSysCacheExists1(RELOID, ObjectIdGetDatum(id))
					: get_attname(id, all.refs[i].objectSubId, true) != NULL;
				break;
			case TSConfigRelationId:
				exists = SearchSysCacheExists1(TSCONFIGOID, ObjectIdGetDatum(id));
				break;
			case TSDictionaryRelationId:
				exists = SearchSysCacheExists1(TSDICTOID, ObjectIdGetDatum(id));
				break;
			case NamespaceRelationId:
				exists = SearchSysCacheExists1(NAMESPACEOID, ObjectIdGetDatum(id));
				break;
			case OperatorFamilyRelationId:
				exists = SearchSysCacheExists1(OPFAMILYOID, ObjectIdGetDatum(id));
				break;
		}
		if (!exists)
			return false;
	}
	return true;
}
