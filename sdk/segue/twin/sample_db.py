"""`segue.twin.sample_db`: the demo's shop database and its tools (segue.demo.shop_db re-exported)."""

from segue.demo.shop_db import ShopDatabase, default_database, describe_table, list_tables, run_query, shop_sql

__all__ = ["ShopDatabase", "default_database", "describe_table", "list_tables", "run_query", "shop_sql"]
