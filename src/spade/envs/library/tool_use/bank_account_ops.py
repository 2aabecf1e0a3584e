"""Personal banking errands where every id is given in the request (execute / happy-path variant).

The agent transfers money between accounts, pays a bill to a listed payee, freezes a card and sets a
savings goal, each with the exact arguments the user states.
"""

from spade.envs.tool_base import ToolUseBaseEnv

import json

PAYEES = ["electricity", "water", "internet", "phone", "council_tax"]
OWNERS = ["Nadia Varga", "Kofi Mensah", "Ines Duarte", "Liam Walsh", "Sofia Rossi"]
GOALS = ["holiday", "new laptop", "emergency fund", "wedding", "bicycle"]


class BankAccountOps(ToolUseBaseEnv):
    _tools = {
        "get_accounts": {
            "description": "List the customer's accounts with their type and balance.",
            "parameters": {},
            "required": [],
        },
        "transfer_funds": {
            "description": "Move money between two of the customer's accounts.",
            "parameters": {
                "from_account": {"type": "string", "description": "Source account number."},
                "to_account": {"type": "string", "description": "Destination account number."},
                "amount": {"type": "number", "description": "Amount in euros, positive."},
            },
            "required": ["from_account", "to_account", "amount"],
        },
        "pay_bill": {
            "description": "Pay a bill to a registered payee from an account.",
            "parameters": {
                "from_account": {"type": "string", "description": "Account number to pay from."},
                "payee": {"type": "string", "description": "Registered payee.", "enum": PAYEES},
                "amount": {"type": "number", "description": "Amount in euros."},
            },
            "required": ["from_account", "payee", "amount"],
        },
        "set_card_status": {
            "description": "Freeze or reactivate a payment card.",
            "parameters": {
                "card_id": {"type": "string", "description": "Card id."},
                "status": {"type": "string", "description": "New status.", "enum": ["active", "frozen"]},
            },
            "required": ["card_id", "status"],
        },
        "set_savings_goal": {
            "description": "Attach a named savings goal with a target amount to a savings account.",
            "parameters": {
                "account": {"type": "string", "description": "Savings account number."},
                "name": {"type": "string", "description": "Goal name."},
                "target": {"type": "number", "description": "Target amount in euros."},
            },
            "required": ["account", "name", "target"],
        },
        "get_exchange_rate": {
            "description": "Current exchange rate from euros to another currency.",
            "parameters": {"currency": {"type": "string", "description": "ISO currency code."}},
            "required": ["currency"],
        },
        "find_atm": {
            "description": "Nearest cash machines to a postcode.",
            "parameters": {"postcode": {"type": "string", "description": "Postcode."}},
            "required": ["postcode"],
        },
    }

    def _setup(self, rng):
        numbers = []
        while len(numbers) < 3:
            number = f"{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}"
            if number not in numbers:
                numbers.append(number)
        checking, savings, joint = numbers
        card = f"CARD-{rng.randint(10000, 99999)}"
        self.state = {
            "owner": rng.choice(OWNERS),
            "accounts": {
                checking: {"type": "checking", "balance": float(rng.randint(1500, 4000))},
                savings: {"type": "savings", "balance": float(rng.randint(2000, 9000))},
                joint: {"type": "joint", "balance": float(rng.randint(300, 1200))},
            },
            "cards": {card: {"status": "active", "account": checking}},
            "transfers": [],
            "bills": [],
            "goals": [],
        }
        move = float(rng.randint(10, 60) * 10)
        payee = rng.choice(PAYEES)
        bill = round(rng.randint(3000, 15000) / 100.0, 2)
        goal, target = rng.choice(GOALS), float(rng.randint(5, 40) * 100)
        source, sink = (checking, joint) if rng.random() < 0.5 else (savings, checking)
        steps = [
            (f"Please transfer {move:.2f} euros from account {source} to account {sink}.",
             {"name": "transfer_funds", "arguments": {"from_account": source, "to_account": sink, "amount": move}},
             lambda s: any(t["from"] == source and t["to"] == sink and abs(t["amount"] - move) < 0.005 for t in s["transfers"])),
            (f"Pay my {payee.replace('_', ' ')} bill of {bill:.2f} euros from my checking account {checking}.",
             {"name": "pay_bill", "arguments": {"from_account": checking, "payee": payee, "amount": bill}},
             lambda s: any(b["from"] == checking and b["payee"] == payee and abs(b["amount"] - bill) < 0.005 for b in s["bills"])),
            (f"I think I lost my card {card}. Freeze it, please.",
             {"name": "set_card_status", "arguments": {"card_id": card, "status": "frozen"}},
             lambda s: s["cards"][card]["status"] == "frozen"),
            (f"Finally, set up a savings goal called '{goal}' with a target of {target:.0f} euros on savings account {savings}.",
             {"name": "set_savings_goal", "arguments": {"account": savings, "name": goal, "target": target}},
             lambda s: any(g["account"] == savings and g["name"] == goal and abs(g["target"] - target) < 0.005 for g in s["goals"])),
        ]
        head = steps[:3]
        rng.shuffle(head)
        steps = head + steps[3:]
        self._steps = steps
        self._user_messages = [text for text, _, _ in steps]
        self._message_criteria = [check for _, _, check in steps]

    def _account(self, number):
        if number not in self.state["accounts"]:
            raise KeyError(f"no account {number!r}")
        return self.state["accounts"][number]

    def _debit(self, number, amount):
        account = self._account(number)
        if amount <= 0:
            raise ValueError("amount must be positive")
        if account["balance"] < amount:
            raise ValueError(f"insufficient funds in {number}: balance {account['balance']:.2f}")
        account["balance"] = round(account["balance"] - amount, 2)

    def tool_get_accounts(self):
        return [{"account": n, "type": a["type"], "balance": a["balance"]} for n, a in self.state["accounts"].items()]

    def tool_transfer_funds(self, from_account, to_account, amount):
        if from_account == to_account:
            raise ValueError("source and destination are the same account")
        target = self._account(to_account)
        self._debit(from_account, amount)
        target["balance"] = round(target["balance"] + amount, 2)
        self.state["transfers"].append({"from": from_account, "to": to_account, "amount": float(amount)})
        return {"status": "completed", "amount": amount}

    def tool_pay_bill(self, from_account, payee, amount):
        self._debit(from_account, amount)
        self.state["bills"].append({"from": from_account, "payee": payee, "amount": float(amount)})
        return {"status": "paid", "payee": payee, "amount": amount}

    def tool_set_card_status(self, card_id, status):
        if card_id not in self.state["cards"]:
            raise KeyError(f"no card {card_id!r}")
        self.state["cards"][card_id]["status"] = status
        return {"card_id": card_id, "status": status}

    def tool_set_savings_goal(self, account, name, target):
        if self._account(account)["type"] != "savings":
            raise ValueError(f"account {account} is not a savings account")
        if target <= 0:
            raise ValueError("target must be positive")
        self.state["goals"].append({"account": account, "name": name.strip(), "target": float(target)})
        return {"account": account, "goal": name, "target": target}

    def tool_get_exchange_rate(self, currency):
        rates = {"USD": 1.08, "GBP": 0.85, "JPY": 161.0, "CHF": 0.96}
        if currency.upper() not in rates:
            raise KeyError(f"unknown currency {currency!r}")
        return {"currency": currency.upper(), "rate": rates[currency.upper()]}

    def tool_find_atm(self, postcode):
        return [{"address": f"High Street 1, {postcode}", "distance_km": 0.4}]

    def solution(self):
        calls = [call for _, call, _ in self._steps[self._current_msg:]]
        return "\n".join([json.dumps(c) for c in calls] + ["<answer>done</answer>"])
