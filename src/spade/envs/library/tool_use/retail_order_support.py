"""Retail customer support where the customer never quotes an order id (missing-value variant).

The agent must look the customer up by email, list their orders to find which order holds the item
they mention, and only then cancel, re-address, return or upgrade it. Guessed ids raise errors.
"""

from spade.envs.tool_base import ToolUseBaseEnv

import json

FIRST_NAMES = ["Maya", "Tariq", "Lena", "Oscar", "Priya", "Jonas", "Aiko", "Rafael"]
LAST_NAMES = ["Okafor", "Lindqvist", "Moreau", "Castillo", "Nakamura", "Brennan", "Haddad"]
PRODUCTS = [
    "desk lamp", "wool scarf", "coffee grinder", "yoga mat", "phone case", "water bottle",
    "backpack", "bluetooth speaker", "cutting board", "running shoes", "throw pillow", "wall clock",
]
STREETS = ["Maple Street", "Harbour Road", "Elm Avenue", "Station Lane", "Cedar Court"]
CITIES = ["Leeds", "Porto", "Denver", "Graz", "Halifax"]


class RetailOrderSupport(ToolUseBaseEnv):
    _tools = {
        "find_customer": {
            "description": "Look up a customer by email address; returns their customer id and name.",
            "parameters": {"email": {"type": "string", "description": "The customer's email address."}},
            "required": ["email"],
        },
        "list_orders": {
            "description": "List every order of a customer with its items and status.",
            "parameters": {"customer_id": {"type": "string", "description": "Customer id, e.g. CUS-1234."}},
            "required": ["customer_id"],
        },
        "get_order": {
            "description": "Show the full details of one order.",
            "parameters": {"order_id": {"type": "string", "description": "Order id, e.g. ORD-12345."}},
            "required": ["order_id"],
        },
        "cancel_order": {
            "description": "Cancel an order that has not shipped yet.",
            "parameters": {
                "order_id": {"type": "string", "description": "Order id."},
                "reason": {
                    "type": "string",
                    "description": "Why the customer cancels.",
                    "enum": ["ordered_by_mistake", "found_cheaper", "no_longer_needed", "delivery_too_slow"],
                },
            },
            "required": ["order_id", "reason"],
        },
        "change_address": {
            "description": "Change the shipping address of an order that has not shipped yet.",
            "parameters": {
                "order_id": {"type": "string", "description": "Order id."},
                "address": {"type": "string", "description": "The full new address."},
            },
            "required": ["order_id", "address"],
        },
        "request_return": {
            "description": "Open a return for one item of a delivered order.",
            "parameters": {
                "order_id": {"type": "string", "description": "Order id."},
                "item": {"type": "string", "description": "The item to return, as named in the order."},
                "reason": {"type": "string", "description": "Return reason.", "enum": ["damaged", "wrong_item", "not_as_described"]},
            },
            "required": ["order_id", "item", "reason"],
        },
        "get_store_hours": {
            "description": "Opening hours of a physical store in a city.",
            "parameters": {"city": {"type": "string", "description": "City name."}},
            "required": ["city"],
        },
        "check_gift_card": {
            "description": "Balance of a gift card.",
            "parameters": {"code": {"type": "string", "description": "Gift card code."}},
            "required": ["code"],
        },
    }

    def _setup(self, rng):
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        email = name.lower().replace(" ", ".") + f"{rng.randint(1, 99)}@example.com"
        customer_id = f"CUS-{rng.randint(1000, 9999)}"
        products = rng.sample(PRODUCTS, 8)
        statuses = ["processing", "processing", "delivered", "shipped"]
        orders = {}
        for index, status in enumerate(statuses):
            order_id = f"ORD-{rng.randint(10000, 99999)}"
            while order_id in orders:
                order_id = f"ORD-{rng.randint(10000, 99999)}"
            orders[order_id] = {
                "customer_id": customer_id,
                "items": products[2 * index: 2 * index + 2],
                "status": status,
                "address": f"{rng.randint(1, 90)} {rng.choice(STREETS)}, {rng.choice(CITIES)}",
                "cancel_reason": None,
            }
        other_id = f"CUS-{rng.randint(1000, 9999)}"
        while other_id == customer_id:
            other_id = f"CUS-{rng.randint(1000, 9999)}"
        self.state = {
            "customers": {email: {"customer_id": customer_id, "name": name}, "guest@example.com": {"customer_id": other_id, "name": "Guest"}},
            "orders": orders,
            "returns": [],
        }
        ids = list(orders)
        cancel_id, move_id, return_id = ids[0], ids[1], ids[2]
        cancel_item = rng.choice(orders[cancel_id]["items"])
        move_item = rng.choice(orders[move_id]["items"])
        return_item = rng.choice(orders[return_id]["items"])
        new_address = f"{rng.randint(100, 400)} {rng.choice(STREETS)}, {rng.choice(CITIES)}"
        reason = rng.choice(["ordered_by_mistake", "found_cheaper", "no_longer_needed"])
        reason_text = {"ordered_by_mistake": "I ordered it by mistake", "found_cheaper": "I found it cheaper elsewhere",
                       "no_longer_needed": "I no longer need it"}[reason]
        self._plan = [
            ("cancel", cancel_id, cancel_item, reason),
            ("address", move_id, move_item, new_address),
            ("return", return_id, return_item, "damaged"),
        ]
        self._email = email
        messages = [
            f"Hi, this is {name} ({email}). Please cancel my order that contains the {cancel_item}: {reason_text}.",
            f"The order with the {move_item} should go to my new address instead: {new_address}.",
            f"The {return_item} I received arrived damaged. Please open a return for it.",
        ]
        criteria = [
            lambda s, o=cancel_id, r=reason: s["orders"][o]["status"] == "cancelled" and s["orders"][o]["cancel_reason"] == r,
            lambda s, o=move_id, a=new_address: s["orders"][o]["address"] == a and s["orders"][o]["status"] == "processing",
            lambda s, o=return_id, i=return_item: any(r["order_id"] == o and r["item"] == i and r["reason"] == "damaged" for r in s["returns"]),
        ]
        if rng.random() < 0.5:
            order = [1, 0, 2]
            messages[0], messages[1] = (
                f"Hi, this is {name} ({email}). The order with the {move_item} should go to my new address instead: {new_address}.",
                f"Also please cancel my order that contains the {cancel_item}: {reason_text}.",
            )
            self._plan = [self._plan[i] for i in order]
            criteria = [criteria[i] for i in order]
        self._user_messages = messages
        self._message_criteria = criteria

    def _order(self, order_id):
        if order_id not in self.state["orders"]:
            raise KeyError(f"no order with id {order_id!r}")
        return self.state["orders"][order_id]

    def tool_find_customer(self, email):
        record = self.state["customers"].get(email.strip().lower())
        if record is None:
            raise KeyError(f"no customer with email {email!r}")
        return dict(record)

    def tool_list_orders(self, customer_id):
        found = [
            {"order_id": oid, "items": list(o["items"]), "status": o["status"]}
            for oid, o in self.state["orders"].items()
            if o["customer_id"] == customer_id
        ]
        if not found and customer_id not in [c["customer_id"] for c in self.state["customers"].values()]:
            raise KeyError(f"no customer with id {customer_id!r}")
        return found

    def tool_get_order(self, order_id):
        order = self._order(order_id)
        return {"order_id": order_id, "items": list(order["items"]), "status": order["status"], "address": order["address"]}

    def tool_cancel_order(self, order_id, reason):
        order = self._order(order_id)
        if order["status"] != "processing":
            raise ValueError(f"order {order_id} is {order['status']} and can no longer be cancelled")
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        return {"order_id": order_id, "status": "cancelled"}

    def tool_change_address(self, order_id, address):
        order = self._order(order_id)
        if order["status"] != "processing":
            raise ValueError(f"order {order_id} is {order['status']}; its address cannot change")
        order["address"] = address.strip()
        return {"order_id": order_id, "address": order["address"]}

    def tool_request_return(self, order_id, item, reason):
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ValueError(f"order {order_id} is {order['status']}; only delivered orders can be returned")
        if item not in order["items"]:
            raise ValueError(f"order {order_id} has no item {item!r}")
        self.state["returns"].append({"order_id": order_id, "item": item, "reason": reason})
        return {"return_opened": True, "order_id": order_id, "item": item}

    def tool_get_store_hours(self, city):
        return {"city": city, "hours": "09:00-18:00"}

    def tool_check_gift_card(self, code):
        raise KeyError(f"gift card {code!r} not found")

    def solution(self):
        customer_id = self.state["customers"][self._email]["customer_id"]
        lines = [
            json.dumps({"name": "find_customer", "arguments": {"email": self._email}}),
            json.dumps({"name": "list_orders", "arguments": {"customer_id": customer_id}}),
        ]
        for kind, order_id, item, detail in self._plan[self._current_msg:]:
            if kind == "cancel":
                call = {"name": "cancel_order", "arguments": {"order_id": order_id, "reason": detail}}
            elif kind == "address":
                call = {"name": "change_address", "arguments": {"order_id": order_id, "address": detail}}
            else:
                call = {"name": "request_return", "arguments": {"order_id": order_id, "item": item, "reason": detail}}
            lines.append(json.dumps(call))
        lines.append("<answer>done</answer>")
        return "\n".join(lines)
