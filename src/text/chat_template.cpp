#include "text/chat_template.h"

#include "text/jinja_builtins.h"
#include "text/jinja_interpreter.h"
#include "text/jinja_parser.h"

namespace folio {

struct ChatTemplate::Program {
  jinja::StmtList statements;
};

namespace {

// jinja2 rejects unknown filters and tests when it compiles a template, even in branches
// that never run; walking the tree here gives the same early error.
Status check_names(const jinja::Expr* expr) {
  if (!expr) return Status::ok();
  if (expr->kind == jinja::ExprKind::kFilter && !jinja::has_filter(expr->name)) {
    return Status::error("template error at line " + std::to_string(expr->line) + ": no filter named '" + expr->name +
                         "'");
  }
  if (expr->kind == jinja::ExprKind::kTest && !jinja::has_test(expr->name)) {
    return Status::error("template error at line " + std::to_string(expr->line) + ": no test named '" + expr->name +
                         "'");
  }
  for (const auto& arg : expr->args) {
    if (Status s = check_names(arg.get()); !s) return s;
  }
  for (const auto& [name, arg] : expr->kwargs) {
    if (Status s = check_names(arg.get()); !s) return s;
  }
  return Status::ok();
}

Status check_names(const jinja::StmtList& body) {
  for (const auto& stmt : body) {
    for (const jinja::Expr* expr : {stmt->expr.get(), stmt->condition.get()}) {
      if (Status s = check_names(expr); !s) return s;
    }
    for (const auto& [condition, branch] : stmt->branches) {
      if (Status s = check_names(condition.get()); !s) return s;
      if (Status s = check_names(branch); !s) return s;
    }
    for (const auto& [name, default_value] : stmt->params) {
      if (Status s = check_names(default_value.get()); !s) return s;
    }
    if (Status s = check_names(stmt->body); !s) return s;
    if (Status s = check_names(stmt->else_body); !s) return s;
  }
  return Status::ok();
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::parse(std::string_view source) try {
  Expected<jinja::StmtList> statements = jinja::parse_template(source);
  if (!statements) return statements.status();
  if (Status s = check_names(*statements); !s) return s;
  auto program = std::make_shared<Program>();
  program->statements = std::move(*statements);
  return ChatTemplate(std::move(program));
} catch (const std::exception& e) {
  // The interpreter reports errors as Status; only allocation failure can throw here, and it
  // must not take the server down.
  return Status::error(std::string("chat template parse failed: ") + e.what());
}

Expected<std::string> ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                           const nlohmann::json& extra_context) const {
  if (!extra_context.is_null() && !extra_context.is_object()) {
    return Status::error("chat template extra_context must be a JSON object");
  }
  // The variables transformers' render_jinja_template passes, in its order, then the
  // caller's extras (which may override them).
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& message : messages) {
    nlohmann::ordered_json item = nlohmann::ordered_json::object();
    item["role"] = message.role;
    item["content"] = message.content;
    list.push_back(std::move(item));
  }
  context["messages"] = std::move(list);
  context["tools"] = nullptr;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  if (extra_context.is_object()) {
    for (const auto& [key, value] : extra_context.items()) context[key] = value;
  }
  return render_context(context);
}

Expected<std::string> ChatTemplate::render_context(const nlohmann::ordered_json& context) const try {
  if (!context.is_object()) return Status::error("chat template context must be a JSON object");
  // Value::from_json copies string bytes as they are (no UTF-8 validation that could throw).
  Expected<jinja::Value> value = jinja::Value::from_json(context);
  if (!value) return value.status();
  return jinja::render(program_->statements, value->as_dict());
} catch (const std::exception& e) {
  return Status::error(std::string("chat template render failed: ") + e.what());
}

}  // namespace folio
