"""The taxonomy: the noun types an entity may have and the verb types a relation may have.

Transcribed from the door catalogue, section 2. Any other value is refused with
``InvalidArgumentError {field: "type"}``; domain kinds use ``custom`` plus a subtype.
"""

NOUN_TYPES = frozenset((
    "person", "organization", "location", "thing", "concept", "event", "agent", "organism",
    "substance", "quality", "timeInterval", "function", "proposition", "document", "media", "file",
    "message", "collection", "dataset", "product", "service", "task", "project", "process", "state",
    "role", "language", "currency", "measurement", "hypothesis", "experiment", "contract",
    "regulation", "interface", "resource", "socialGroup", "institution", "norm",
    "informationContent", "informationBearer", "relationship", "custom",
))

VERB_TYPES = frozenset((
    "instanceOf", "subclassOf", "participatesIn", "relatedTo", "contains", "partOf", "references",
    "locatedAt", "adjacentTo", "precedes", "during", "occursAt", "causes", "enables", "prevents",
    "dependsOn", "requires", "creates", "transforms", "becomes", "modifies", "consumes", "destroys",
    "owns", "attributedTo", "hasQuality", "realizes", "affects", "composedOf", "inherits",
    "memberOf", "worksWith", "friendOf", "follows", "likes", "reportsTo", "mentors", "communicates",
    "describes", "defines", "categorizes", "measures", "evaluates", "uses", "implements", "extends",
    "equivalentTo", "believes", "conflicts", "synchronizes", "competes", "canCause", "mustCause",
    "wouldCauseIf", "couldBe", "mustBe", "counterfactual", "knows", "doubts", "desires", "intends",
    "fears", "loves", "hates", "hopes", "perceives", "learns", "probablyCauses",
    "uncertainRelation", "correlatesWith", "approximatelyEquals", "greaterThan", "similarityDegree",
    "moreXThan", "hasDegree", "partiallyHas", "carries", "encodes", "obligatedTo", "permittedTo",
    "prohibitedFrom", "shouldDo", "mustNotDo", "trueInContext", "perceivedAs", "interpretedAs",
    "validInFrame", "trueFrom", "overlaps", "immediatelyAfter", "eventuallyLeadsTo",
    "simultaneousWith", "hasDuration", "recurringWith", "containsSpatially", "overlapsSpatially",
    "surrounds", "connectedTo", "above", "below", "inside", "outside", "facing", "represents",
    "embodies", "opposes", "alliesWith", "conformsTo", "measuredIn", "convertsTo", "hasMagnitude",
    "dimensionallyEquals", "persistsThrough", "gainsProperty", "losesProperty", "remainsSame",
    "functionalPartOf", "topologicalPartOf", "temporalPartOf", "conceptualPartOf",
    "rigidlyDependsOn", "functionallyDependsOn", "historicallyDependsOn", "endorses", "contradicts",
    "supports", "supersedes",
))

DEFAULT_VERB = "relatedTo"

# Subtype prefixes that belong to the layers that write them (section 2.3).
RESERVED_SUBTYPE_PREFIXES = ("vfs.", "accords.", "memory.", "policy.", "engine.")

assert len(NOUN_TYPES) == 42 and len(VERB_TYPES) == 127
